//! `pog validator`: registers agents and their GPUs, challenges a GPU through its agent,
//! verifies the answer (values, Merkle proofs, its own clock) and stores a signed record.

use crate::registry::{Registry, RegistryError};
use crate::registry_model::RegisteredGpu;
use crate::store::{RecordStore, StoreError};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post as post_route};
use axum::Router;
use pog_net::buckets::PerSource;
use pog_net::http::{post_counted, ApiError, BuildClientError, ClientSettings};
use pog_net::locked::Locked;
use pog_proof::challenge::Addressee;
use pog_proof::session::{Outcome, SpotChecked, ValidatorSession};
use pog_proof::wire::{kind, ChallengeMessage, Commitment, OpenRequest, Openings, Register};
use pog_proof::wire::{HostClaim, MemoryReady, WalkMessage};
use pog_records::{
    Change, Claimed, Exchange, Failure, FailureKind, Policy, PolicyError, ProofKind, ProofRecord,
    Ran, RegistrationRecord, SignedBody, RECORD_VERSION,
};
use pog_signed::{random_bytes, GpuUuid, Identity, PublicKey};
use pog_spec::SpecDb;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why one challenge exchange with an agent ended without a verdict.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    #[error(transparent)]
    Post(#[from] pog_net::http::PostError),
    #[error(transparent)]
    Wire(#[from] pog_signed::WireError),
    #[error(transparent)]
    Protocol(#[from] pog_proof::session::ProtocolError),
    #[error("the exchange did not finish within {0} ms")]
    Deadline(u64),
    /// A proof of storage's message that does not fit its session.
    #[error(transparent)]
    Storage(#[from] pog_proof::storage::session::RoundError),
    /// The validator's own verification task died (a bug, not the agent's doing).
    #[error("the validator's verification of the openings failed")]
    Verifier,
}

impl ExchangeError {
    /// The record's account of this error.
    pub(crate) fn failure(&self) -> Failure {
        use pog_net::http::PostError as P;
        let (kind, message) = match self {
            ExchangeError::Post(P::Unreachable { .. }) => (
                FailureKind::Unreachable,
                "nothing answered at the agent's endpoint".into(),
            ),
            ExchangeError::Post(P::Timeout { timeout, .. }) => (
                FailureKind::Timeout,
                format!("the agent did not answer within {} s", timeout.as_secs()),
            ),
            ExchangeError::Post(P::Transport { source, .. }) => {
                (FailureKind::Transport, how_it_broke(source).into())
            }
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
            ExchangeError::Storage(e) => (FailureKind::Protocol, crate::datasets::round_summary(e)),
            ExchangeError::Verifier => (FailureKind::Protocol, self.to_string()),
        };
        Failure { kind, message }
    }
}

/// How an established connection to the agent broke, from the transport error's kind (never
/// its text, which names the agent's endpoint): closed with no answer (as an agent closes a
/// kept-alive connection it has waited on for its header timeout, the request under way),
/// reset, or its answer cut off. A load run's records then say which of these its broken
/// connections were (docs/protocol.md, "Load").
fn how_it_broke(error: &reqwest::Error) -> &'static str {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        // Reading the answer's body (a decode error wraps the body's).
        if e.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_body)
        {
            return "the agent's answer was cut off: the connection broke in the middle of it";
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            if matches!(
                io.kind(),
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe
            ) {
                return "the agent reset the connection before answering";
            }
        }
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return "the agent closed the connection before answering";
        }
        cause = e.source();
    }
    "the connection to the agent broke"
}

/// What broke the protocol, in the validator's words only (no value the agent chose).
fn protocol_summary(e: &pog_proof::session::ProtocolError) -> String {
    use pog_proof::session::ProtocolError as P;
    use pog_proof::wire::OpeningsError as O;
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
        P::Openings(O::Oversized { field, .. }) => {
            format!("malformed openings: {field} are longer than the leaves asked take")
        }
        P::Openings(O::Truncated { field, .. }) => {
            format!("malformed openings: {field} are shorter than the leaves asked take")
        }
        P::Openings(O::NotAFrame { .. }) => {
            "the openings are not a frame of this challenge version".into()
        }
        P::Openings(O::Head(_)) => {
            "the openings frame's head is not a signed digest of this agent's".into()
        }
        P::Openings(O::FrameLength { .. }) => {
            "the openings frame carries other bytes than its head names".into()
        }
        P::Openings(O::Digest) => "the openings' bytes are not those their head signs".into(),
        P::Multiproof(_) => "the leaves drawn cannot be proven by a multiproof".into(),
    }
}

/// What was wrong with an agent's message, in the validator's words only.
fn wire_summary(e: &pog_signed::WireError) -> String {
    use pog_signed::WireError as W;
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
    Wire(#[from] pog_signed::WireError),
    /// The policy cannot plan a challenge.
    #[error("bad policy: {0}")]
    Policy(PolicyError),
    /// The ledger did not take the signed record durably: the record is refused (not stored).
    #[error("the ledger refused the record: {0}")]
    Ledger(#[from] crate::ledger::LedgerError),
    /// The hardened HTTP client could not be built: the validator does not start.
    #[error(transparent)]
    Client(#[from] BuildClientError),
}

/// A record that was not stored fails the challenge with the store's reason.
impl From<StoreError> for ValidatorError {
    fn from(e: StoreError) -> ValidatorError {
        match e {
            StoreError::Registry(e) => ValidatorError::Registry(e),
            StoreError::Wire(e) => ValidatorError::Wire(e),
            StoreError::Ledger(e) => ValidatorError::Ledger(e),
        }
    }
}

/// A model the spec database does not know is the GPU's problem ([`ValidatorError::UnknownModel`]);
/// anything else a policy cannot plan is the policy's.
impl From<PolicyError> for ValidatorError {
    fn from(e: PolicyError) -> ValidatorError {
        match e {
            PolicyError::UnknownModel(model) => ValidatorError::UnknownModel(model),
            e => ValidatorError::Policy(e),
        }
    }
}

/// What a validator allows, beyond the challenge policy.
#[derive(Debug, Clone)]
pub struct Config {
    /// GPUs of the simulated test double may register (tests and tours; their records say
    /// `simulated: true`).
    pub accept_simulated: bool,
    /// Agents may advertise loopback, private and link-local endpoints (tests and private
    /// deployments; see [`pog_net::endpoint`]).
    pub allow_private_endpoints: bool,
    /// The most GPUs one agent key may claim.
    pub max_gpus_per_agent: usize,
    /// Registrations each source address may make per minute (a burst of that many, then
    /// refilled evenly).
    pub registrations_per_minute: u32,
    /// KiB of new reports (agent-signed inspection and benchmark records, `POST /v1/reports`)
    /// each registered GPU may add per hour, whatever key or address sends them (a burst of
    /// that much, then refilled evenly; at least one report of
    /// [`pog_records::reports::MAX_REPORT_BYTES`]); content the validator holds already costs nothing.
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

/// The challenger: it registers agents, challenges their GPUs and checks the answers, and
/// keeps what it concludes through its [`RecordStore`].
pub struct Validator {
    records: Arc<RecordStore>,
    client: reqwest::Client,
    config: Config,
    limiter: Mutex<PerSource>,
    /// Each GPU's last measured round trip, ms, credited to its next challenge.
    round_trips: Mutex<HashMap<String, f64>>,
    /// Record pages built at once ([`page_permits`]): a page is megabytes of JSON to read and
    /// write, and readers asking for them back to back must not take every core from the rest
    /// of the API.
    pages: tokio::sync::Semaphore,
    /// Each GPU's last proofs, for `/metrics`.
    proofs: crate::metrics::Proofs,
    /// Each agent's storage data set, sent, being built or kept ([`crate::storage`]).
    datasets: crate::datasets::Datasets,
    /// Each host's fastest genuine set-up per proof shape, which bounds how slow a later
    /// set-up may count ([`crate::set_up_pace`]).
    set_up_paces: crate::set_up_pace::SetUpPaces,
    /// Held while releases' records are written ([`Validator::record_releases`]), so that
    /// this validator's passes never write one twice.
    recording_releases: Mutex<()>,
}

/// Record pages built at once: half the cores, at least one.
fn page_permits() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Checks an agent's "ready" against the challenge it answers.
fn check_ready(
    ready: &MemoryReady,
    signer: &PublicKey,
    id: &str,
    uuid: &str,
    agent: &PublicKey,
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
            expected: agent.clone(),
            got: signer.clone(),
        });
    }
    if ready.gpu_uuid != uuid {
        return Err(P::WrongGpu {
            expected: uuid.into(),
            got: ready.gpu_uuid.to_string(),
        });
    }
    Ok(())
}

/// The largest commitment an agent may send (one is under a kilobyte).
const MAX_COMMITMENT_BYTES: usize = 64 << 10;

/// Time past twice the expected commit time that the validator still waits for a commitment.
const COMMIT_SLACK_MS: u64 = 5_000;

impl Validator {
    /// A validator with the default [`Config`]: real GPUs on public endpoints only.
    pub fn new(identity: Identity, registry: Registry) -> Result<Validator, ValidatorError> {
        Validator::with_config(identity, registry, Config::default())
    }

    /// A validator that allows what `config` says, keeping its records in `registry` signed
    /// with `identity` (no ledger: [`Validator::over`] takes a store with one); an error when
    /// its hardened HTTP client cannot be built.
    pub fn with_config(
        identity: Identity,
        registry: Registry,
        config: Config,
    ) -> Result<Validator, ValidatorError> {
        Validator::over(Arc::new(RecordStore::new(identity, registry)), config)
    }

    /// A validator keeping its records in `records`, allowing what `config` says; an error
    /// when its hardened HTTP client cannot be built.
    pub fn over(records: Arc<RecordStore>, config: Config) -> Result<Validator, ValidatorError> {
        // Redirects are refused (an agent's endpoint must not send the validator elsewhere);
        // names resolve to public addresses only, at every connection (DNS rebinding); a
        // proxy from the environment would be connected to instead of the endpoint, and the
        // resolver would vet only the proxy.
        let client = ClientSettings {
            connect_timeout: Some(Duration::from_secs(5)),
            proxy_from_env: false,
            resolver: Some(pog_net::endpoint::PublicResolver {
                allow_private: config.allow_private_endpoints,
            }),
            ..ClientSettings::new("challenge")
        }
        .build()?;
        Ok(Validator {
            records,
            client,
            round_trips: Mutex::new(HashMap::new()),
            pages: tokio::sync::Semaphore::new(page_permits()),
            proofs: crate::metrics::Proofs::default(),
            datasets: crate::datasets::Datasets::default(),
            set_up_paces: crate::set_up_pace::SetUpPaces::default(),
            recording_releases: Mutex::new(()),
            limiter: Mutex::new(PerSource::per_minute(f64::from(
                config.registrations_per_minute,
            ))),
            config,
        })
    }

    /// Where the validator's records are signed, logged and kept.
    pub fn records(&self) -> &Arc<RecordStore> {
        &self.records
    }

    /// What the validator allows.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The client the validator reaches agents with (hardened: no redirects, public addresses
    /// only unless allowed).
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Each agent's storage data set, as this validator holds it.
    pub(crate) fn datasets(&self) -> &crate::datasets::Datasets {
        &self.datasets
    }

    /// The round trip last measured to `uuid`'s agent, ms (0 before any), credited to its
    /// next timed exchange.
    pub(crate) fn round_trip_to(&self, uuid: &str) -> f64 {
        self.round_trips.locked().get(uuid).copied().unwrap_or(0.0)
    }

    /// The validator's public key, which signs its records.
    pub fn public_key(&self) -> PublicKey {
        self.records.signer_key()
    }

    /// The registry (the schedule reads it; tests inspect it).
    pub fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.records.registry()
    }

    /// Signs `body` under its kind and stores it among its GPU's records under `id`, as the
    /// round of the fleet's `slot` where it is one ([`RecordStore::store`]).
    pub(crate) fn store<T: SignedBody>(
        &self,
        (id, slot): (&str, Option<u64>),
        accepted: bool,
        body: &T,
    ) -> Result<(), ValidatorError> {
        let storing = Instant::now();
        self.records.store((id, slot), accepted, body)?;
        tracing::debug!(
            target: "pog::exchange",
            stored_ms = storing.elapsed().as_millis() as u64,
            "record stored"
        );
        Ok(())
    }

    /// Registers `agent` at `endpoint` with `gpus` and records each change: the blocking half
    /// of `POST /v1/register` (the registry's write, the ledger's appends).
    fn store_registration(
        &self,
        agent: &PublicKey,
        (endpoint, host): (&str, Option<HostClaim>),
        gpus: &[pog_proof::wire::GpuClaim],
    ) -> Result<(), ValidatorError> {
        let changes = self.registry().register(
            agent,
            (endpoint, host),
            gpus,
            self.records.now_ms(),
            self.config.max_gpus_per_agent,
        )?;
        let mut recorded = Vec::new();
        let mut written = Ok(());
        for (gpu, change) in gpus.iter().zip(&changes) {
            if *change != Change::Same {
                written = self.record_registration(agent, gpu, *change);
                if written.is_err() {
                    break;
                }
                tracing::info!(gpu = %gpu.uuid, %agent, model = %gpu.model, event = ?change, "registered");
                recorded.push(gpu.uuid.to_string());
            }
        }
        // Until this is noted, the same claim registers as its change again: a record lost
        // above is written at the agent's next registration, and those written before it
        // (noted even then) are not written twice.
        self.registry().registrations_recorded(&recorded)?;
        written
    }

    /// Signs and stores a registration event.
    fn record_registration(
        &self,
        agent: &PublicKey,
        gpu: &pog_proof::wire::GpuClaim,
        event: Change,
    ) -> Result<(), ValidatorError> {
        let record = RegistrationRecord {
            version: RECORD_VERSION,
            event,
            gpu_uuid: gpu.uuid.clone(),
            agent: agent.clone(),
            model: gpu.model.clone(),
            bus_id: gpu.bus_id.clone(),
            simulated: gpu.simulated,
            reason: None,
            recorded_at_ms: self.records.now_ms(),
        };
        let id = format!("registration-{}", hex::encode(random_bytes::<16>()));
        self.store((&id, None), false, &record)
    }

    /// Takes a GPU off the registry for `reason`, bars its agent from claiming it again for
    /// `bar`, and records the release ([`Validator::record_releases`]: a record that cannot
    /// be written now is kept in the registry and written by a later pass).
    pub fn release(&self, uuid: &str, reason: &str, bar: Duration) -> Result<(), ValidatorError> {
        let now = self.records.now_ms();
        let barred_until = now.saturating_add(u64::try_from(bar.as_millis()).unwrap_or(u64::MAX));
        if self
            .registry()
            .release(uuid, barred_until, (reason, now))?
            .is_some()
        {
            self.proofs.forget(uuid);
        }
        self.record_releases().map(|_| ())
    }

    /// Writes the record of every release the registry keeps as not yet on record (its
    /// record was lost: the database away or its disk full when it was released) and notes
    /// each written; how many it wrote. Run at every release and at every round's start. A
    /// record another validator of the fleet wrote meanwhile (its id is stored already) is
    /// only noted; one that two validators write at once is stored once (the id is unique),
    /// and the loser's error leaves it to its next pass to note.
    pub fn record_releases(&self) -> Result<usize, ValidatorError> {
        let _one_pass = self.recording_releases.locked();
        let pending = self.registry().unrecorded_releases()?;
        let mut written = 0;
        for release in pending {
            if !self.registry().has_record(&release.record_id)? {
                self.store((&release.record_id, None), false, &release.record)?;
                written += 1;
            }
            self.registry().release_recorded(&release.record_id)?;
        }
        Ok(written)
    }

    /// Challenges one registered GPU with a proof of kind `K` and records the result
    /// (accepted, rejected, or failed). The whole exchange runs under one deadline: the
    /// challenge's expiry to commit (or, for a kind that sets up first, to set up: the
    /// policy's expiry, longer for a set-up that grows with the claim,
    /// [`ProofKind::set_up_expiry_ms`]), and the policy's expiry again for the rest.
    pub async fn challenge<K: ProofKind>(
        &self,
        uuid: &str,
        policy: &Policy,
    ) -> Result<ProofRecord<K::Details>, ValidatorError> {
        self.challenge_in_slot::<K>(uuid, policy, None).await
    }

    /// [`Validator::challenge`] as the round of the fleet's `slot`, where it is one: the
    /// record finishes this validator's claim of that slot, or is refused where the claim was
    /// settled as the fleet's miss meanwhile ([`crate::registry::Registry::record_logged`]).
    pub async fn challenge_in_slot<K: ProofKind>(
        &self,
        uuid: &str,
        policy: &Policy,
        slot: Option<u64>,
    ) -> Result<ProofRecord<K::Details>, ValidatorError> {
        let gpu = self
            .records
            .unblocked(|| self.registry().gpu(uuid))
            .await?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        self.challenge_registered::<K>(&gpu, policy, slot).await
    }

    /// [`Validator::challenge_in_slot`] of the GPU of registry row `gpu`, read beforehand (a
    /// round reads its GPUs' rows together, once, at its start).
    pub async fn challenge_registered<K: ProofKind>(
        &self,
        gpu: &RegisteredGpu,
        policy: &Policy,
        slot: Option<u64>,
    ) -> Result<ProofRecord<K::Details>, ValidatorError> {
        policy.validate()?;
        let uuid = gpu.uuid.as_str();
        let spec = SpecDb::embedded()
            .by_model(&gpu.model)
            .ok_or_else(|| ValidatorError::UnknownModel(gpu.model.clone()))?;
        let (cores, ram) = (gpu.host_cores, gpu.host_ram);
        let claimed = Claimed { spec, cores, ram };
        let plan = K::plan(policy, claimed)?;
        // The challenge's expiry: the policy's, or longer for a set-up that grows with the
        // claim (a large host's RAM build).
        let expiry_ms = K::set_up_expiry_ms(&plan, policy, &claimed);
        let expected_ms = K::expected_ms(&plan);
        let pace_key = crate::set_up_pace::SetUpPaces::key(K::NAME, &gpu.agent, &plan);
        if K::CALIBRATES_BY_SET_UP {
            self.take_up_set_up_pace(&pace_key).await;
        }
        let challenge = K::challenge(
            &plan,
            random_bytes(),
            Addressee {
                gpu_uuid: gpu.uuid.clone(),
                gpu_bus_id: gpu.bus_id.clone(),
                agent_key: gpu.agent.clone(),
                validator_key: self.public_key(),
            },
        );
        let id = hex::encode(random_bytes::<16>());
        // Sent to start the timed phase of a kind that sets up first; unused otherwise.
        let start: [u8; 32] = random_bytes();
        let secret: [u8; 32] = random_bytes();
        let deadline_ms = expiry_ms.saturating_add(policy.expiry_ms);
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
        let round_trip_ms = self.round_trip_to(uuid);
        let mut bytes = (0usize, 0usize); // to the agent, from the agent
        let mut set_up_ms = None;
        // The set-up as the bound counts it: judged once, so that the record states the bound
        // the session held the answer to (another set-up of the host may pass meanwhile).
        let mut judged_set_up_ms = None;
        let remaining = || Duration::from_millis(deadline_ms).saturating_sub(started.elapsed());
        let exchange = async {
            let issued_at_ms = self.records.now_ms();
            let message = ChallengeMessage {
                id: id.clone(),
                challenge: challenge.clone(),
                issued_at_ms,
                expires_at_ms: issued_at_ms + expiry_ms,
            };
            // Judged against the kind's time once its set-up (if any) has run: a kind that
            // calibrates in its set-up is judged against what that took, counted at most a
            // little slower than the host's fastest that checked out ([`crate::set_up_pace`]).
            let session = |window, judged_set_up_ms| {
                ValidatorSession::timed(
                    id.clone(),
                    K::checked(challenge.clone(), &start),
                    window,
                    gpu.agent.clone(),
                    K::expected_after_set_up(&plan, judged_set_up_ms),
                    secret,
                    K::samples(policy),
                )
            };
            // When the set-up's answer was in hand (a kind that sets up first).
            let (in_hand, asked, window) = match K::EXCHANGE {
                Exchange::Timed { path, kind } => (
                    None,
                    Asked {
                        path,
                        envelope: self.records.seal(kind, &message)?,
                        issued_at_ms,
                        wait: commit_wait,
                    },
                    (issued_at_ms, message.expires_at_ms),
                ),
                Exchange::SetUp {
                    path,
                    kind,
                    ready_kind,
                    start_path,
                    start_kind,
                } => {
                    let envelope = self.records.seal(kind, &message)?;
                    let sent = Instant::now();
                    let (n, answer) = post_counted(
                        &self.client,
                        &format!("{}{path}", gpu.endpoint),
                        &envelope,
                        remaining().min(Duration::from_millis(expiry_ms)),
                        MAX_COMMITMENT_BYTES,
                    )
                    .await?;
                    let in_hand = Instant::now();
                    // Less the round trip, as the timed phase is credited it.
                    set_up_ms = Some(pog_proof::timing::set_up_compute_ms(
                        sent.elapsed().as_secs_f64() * 1e3,
                        round_trip_ms,
                    ));
                    bytes = (bytes.0 + n, bytes.1 + answer.len());
                    let (ready, signer): (MemoryReady, PublicKey) =
                        pog_signed::decode(&answer, ready_kind)?;
                    check_ready(&ready, &signer, &id, uuid, &gpu.agent)?;
                    let start_issued_ms = self.records.now_ms();
                    let walk = WalkMessage {
                        challenge_id: id.clone(),
                        walk_nonce: start,
                        issued_at_ms: start_issued_ms,
                        expires_at_ms: start_issued_ms + commit_wait.as_millis() as u64,
                    };
                    (
                        Some(in_hand),
                        Asked {
                            path: start_path,
                            envelope: self.records.seal(start_kind, &walk)?,
                            issued_at_ms: start_issued_ms,
                            wait: commit_wait,
                        },
                        (walk.issued_at_ms, walk.expires_at_ms),
                    )
                }
            };
            judged_set_up_ms = self.set_up_paces.judged(&pace_key, set_up_ms);
            if let Some(in_hand) = in_hand {
                handled(asked.path, in_hand);
            }
            self.commit_and_verify(
                session(window, judged_set_up_ms),
                asked,
                &gpu.endpoint,
                round_trip_ms,
                &remaining,
                &mut bytes,
            )
            .await
        };
        let result = within(deadline_ms, remaining(), exchange).await;
        let record = ProofRecord {
            version: RECORD_VERSION,
            challenge_id: id.clone(),
            gpu_uuid: gpu.uuid.clone(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            policy: K::as_run(&plan, policy),
            details: K::details(Ran {
                plan: &plan,
                policy,
                challenge,
                start,
                set_up_ms,
                simulated: gpu.simulated,
            }),
            // An exchange that ended before its session was made is stated against its
            // set-up as judged now.
            expected_ms: K::expected_after_set_up(
                &plan,
                judged_set_up_ms.or_else(|| self.set_up_paces.judged(&pace_key, set_up_ms)),
            ),
            accepted: result.as_ref().is_ok_and(|o| o.accepted),
            failure: result.as_ref().err().map(ExchangeError::failure),
            outcome: result.ok(),
            spot_check_secret: hex::encode(secret),
            bytes_to_agent: bytes.0,
            bytes_from_agent: bytes.1,
            recorded_at_ms: self.records.now_ms(),
        };
        self.records
            .unblocked(|| self.store((&id, slot), record.accepted, &record))
            .await?;
        // Every spot check right, in time or late: the set-up was the host's real pace.
        let checked_out = record
            .outcome
            .as_ref()
            .is_some_and(|o| o.checked > 0 && o.wrong() == 0);
        if let Some(ms) = set_up_ms.filter(|_| checked_out && K::CALIBRATES_BY_SET_UP) {
            let noted = self
                .records
                .unblocked(|| self.registry().note_set_up(&pace_key, ms))
                .await;
            if let Err(e) = noted {
                tracing::warn!(error = %e, gpu = uuid, "the host's set-up could not be kept in the registry: kept in memory only");
            }
            self.set_up_paces.checked_out(pace_key, ms);
        }
        self.proofs.note(
            &gpu.uuid,
            &gpu.model,
            K::NAME,
            record.outcome.as_ref().map(|o| o.time.ratio),
            record.accepted,
        );
        if record.failure.is_none() {
            // For the next challenge's allowance (see above).
            let rtt = self.round_trip(&gpu.endpoint).await;
            self.round_trips.locked().insert(uuid.to_string(), rtt);
        }
        Ok(record)
    }

    /// Takes the fastest set-up on record for `key` into memory: at this validator's first
    /// round of that host and shape (it restarted), and at every round on a fleet's database,
    /// where another validator may have seen a faster one. A registry that cannot say leaves
    /// the round judged by what is in memory (logged).
    async fn take_up_set_up_pace(&self, key: &str) {
        let fastest = self
            .records
            .unblocked(|| {
                let registry = self.registry();
                if self.set_up_paces.knows(key) && !registry.is_postgres() {
                    return Ok(None);
                }
                registry.fastest_set_up(key)
            })
            .await;
        match fastest {
            Ok(Some(ms)) => self.set_up_paces.checked_out(key.to_string(), ms),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the hosts' set-up paces could not be read: judged by this validator's own")
            }
        }
    }

    /// Sends the message that asks for a commitment (`asked`), waits for the commitment (at
    /// most `asked.wait` and what is left of the exchange), notes when it arrived on the
    /// validator's clock, and finishes with [`Self::open_and_verify`].
    async fn commit_and_verify<C: SpotChecked + Send + 'static>(
        &self,
        session: ValidatorSession<C>,
        asked: Asked,
        endpoint: &str,
        round_trip_ms: f64,
        remaining: &impl Fn() -> Duration,
        bytes: &mut (usize, usize),
    ) -> Result<Outcome, ExchangeError> {
        let sent = Instant::now();
        let (n, answer) = post_counted(
            &self.client,
            &format!("{endpoint}{}", asked.path),
            &asked.envelope,
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
        let in_hand = Instant::now();
        let (commitment, signer): (Commitment, PublicKey) =
            pog_signed::decode(answer, kind::COMMITMENT)?;
        let request: OpenRequest =
            session.on_commitment(&commitment, &signer, arrived_ms, round_trip_ms)?;
        let open_envelope = self.records.seal(kind::OPEN, &request)?;
        // The answer's size is fixed by the leaves asked: no more of it is read.
        let limit = session
            .openings_limit()
            .unwrap_or(pog_signed::MAX_MESSAGE_BYTES)
            .min(pog_signed::MAX_MESSAGE_BYTES);
        handled("/v1/open", in_hand);
        let (n, answer) = post_counted(
            &self.client,
            &format!("{endpoint}/v1/open"),
            &open_envelope,
            remaining,
            limit,
        )
        .await?;
        *bytes = (bytes.0 + n, bytes.1 + answer.len());
        // Decoding and recomputing the spot checks takes tens of ms of CPU: off the runtime's
        // workers, so other challenges' timings are not delayed by it.
        tokio::task::spawn_blocking(move || {
            let (openings, signer) =
                Openings::open(&answer).map_err(pog_proof::session::ProtocolError::Openings)?;
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
struct Asked {
    path: &'static str,
    envelope: pog_signed::Envelope,
    issued_at_ms: u64,
    wait: Duration,
}

/// Logs (debug, `pog::exchange`) how long the validator took from an exchange's answer in hand
/// to its next request to `path` (decoding, checking, signing): the load harness reads it.
fn handled(path: &str, in_hand: Instant) {
    tracing::debug!(
        target: "pog::exchange",
        step = path,
        handled_us = in_hand.elapsed().as_micros() as u64,
        "next request"
    );
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

/// The challenger's routes: `POST /v1/register`, `GET /v1/gpus`, `GET /v1/records/{uuid}`,
/// `GET /healthz`, `GET /metrics` (composed with the rest in [`crate::app::Api`]).
pub fn router(validator: Arc<Validator>) -> Router {
    Router::new()
        .route("/v1/register", post_route(register))
        .route("/v1/gpus", get(gpus))
        .route("/v1/records/{uuid}", get(records))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .with_state(validator)
}

/// `GET /metrics`: each GPU's last proofs as the validator timed them ([`crate::metrics`]).
/// A page grows with the GPUs challenged (two series each), so it is rendered like a record
/// page: on a blocking task, under the same bound on pages built at once.
async fn metrics(State(v): State<Arc<Validator>>) -> Result<Response, ApiError> {
    let _permit =
        v.pages.acquire().await.map_err(|_| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the validator is stopping")
        })?;
    let rendering = v.clone();
    let page = tokio::task::spawn_blocking(move || rendering.proofs.render())
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering the metrics failed",
            )
        })?
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("rendering the metrics: {e}"),
            )
        })?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        page,
    )
        .into_response())
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
    let (reg, agent): (Register, PublicKey) = pog_signed::decode(&body, kind::REGISTER)?;
    let bad = |message: String| Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    let endpoint =
        match pog_net::endpoint::validate(&reg.endpoint, v.config.allow_private_endpoints) {
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
    if let Some(HostClaim {
        cores,
        storage,
        ram,
        ..
    }) = reg.host
    {
        if let Some(bytes) = ram {
            if let Err(e) = pog_proof::ram::plan(bytes, 1, pog_proof::ram::floor_rate()) {
                return bad(e.to_string());
            }
        }
        if !(1..=pog_proof::cpu::MAX_LANES).contains(&cores) {
            return bad(format!(
                "a host claims 1 to {} cores, not {cores}",
                pog_proof::cpu::MAX_LANES
            ));
        }
        if let Some(claim) = storage {
            match claim.shape() {
                Ok(shape) if shape.bytes() == claim.bytes => {}
                Ok(shape) => {
                    return bad(format!(
                        "a storage claim of {} bytes is not whole items of its class (the \
                         nearest below is {} bytes)",
                        claim.bytes,
                        shape.bytes()
                    ))
                }
                Err(e) => return bad(format!("a storage claim that holds no data set: {e}")),
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for g in &reg.gpus {
        // The UUID is bounded by its type (`GpuUuid`: printable ASCII, as the ledger frames
        // it), checked when the message was read.
        if [&g.bus_id, &g.model]
            .iter()
            .any(|f| f.is_empty() || f.len() > MAX_FIELD_BYTES)
        {
            return bad(format!(
                "a GPU's bus id and model must be 1 to {MAX_FIELD_BYTES} bytes"
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
    // The registry's write and the registration records (the ledger's durable appends) run
    // on a blocking task, off the API's workers.
    let registered = reg.gpus.len();
    let stored = v.clone();
    let stored = tokio::task::spawn_blocking(move || {
        stored.store_registration(&agent, (&endpoint, reg.host), &reg.gpus)
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the registration failed"))?;
    match stored {
        Ok(()) => {}
        Err(ValidatorError::Registry(
            e @ (RegistryError::ClaimedElsewhere { .. } | RegistryError::Barred { .. }),
        )) => return Err(ApiError::new(StatusCode::CONFLICT, e.to_string())),
        Err(ValidatorError::Registry(e @ RegistryError::TooManyGpus { .. })) => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))
        }
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.to_string(),
            ))
        }
    }
    Ok((
        StatusCode::OK,
        axum::Json(serde_json::json!({ "registered": registered })),
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
    pub uuid: GpuUuid,
    /// The GPU's model, as registered.
    pub model: String,
    /// The GPU's PCI bus id.
    pub bus_id: String,
    /// The agent it is registered to (its public key).
    pub agent: PublicKey,
    /// The GPU is the simulated test double.
    pub simulated: bool,
}

/// What `GET /v1/gpus` returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct GpuList {
    /// This page's GPUs, in UUID order.
    pub gpus: Vec<ListedGpu>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<GpuUuid>,
}

async fn gpus(
    State(v): State<Arc<Validator>>,
    Query(page): Query<GpuPage>,
) -> Result<Response, ApiError> {
    let limit = page.limit.unwrap_or(100).clamp(1, MAX_RECORDS_PAGE);
    let records = v.records().clone();
    let found = tokio::task::spawn_blocking(move || records.read(|r| r.gpus(&page.after, limit)))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the registry read failed",
            )
        })?
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
    pub envelope: pog_signed::Envelope,
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
    // The page is read on its own connection, parsed and written on a blocking task, and
    // only so many at once: neither the writers' lock, nor the API's workers, nor every core
    // is held for its megabytes.
    let _permit =
        v.pages.acquire().await.map_err(|_| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the validator is stopping")
        })?;
    let records = v.records().clone();
    let page = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ApiError> {
        let failed = |e: &dyn std::fmt::Display| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        };
        let (rows, cut) = records
            .read(|r| r.records_within(&uuid, page.after, limit, MAX_RECORDS_PAGE_BYTES))
            .map_err(|e| failed(&e))?;
        // The page goes on after its last row, even one that is left out below.
        let next_after = (cut || rows.len() == limit)
            .then(|| rows.last().map(|(id, _)| *id))
            .flatten();
        let records: Vec<StoredRecord> = rows
            .into_iter()
            .filter_map(|(id, json)| {
                let envelope: pog_signed::Envelope = serde_json::from_str(&json).ok()?;
                let record = serde_json::from_str(&envelope.body).ok()?;
                Some(StoredRecord {
                    id,
                    record,
                    envelope,
                })
            })
            .collect();
        let page = RecordPage {
            gpu_uuid: uuid,
            records,
            next_after,
        };
        serde_json::to_vec(&page).map_err(|e| failed(&e))
    })
    .await
    .map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the registry read failed",
        )
    })?;
    let body = page?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::registry::testing::Place;

    /// A listener on loopback whose one connection gets `treat` (the stream, once the
    /// request's head and body are in) on a thread of its own; its URL.
    fn one_connection(treat: fn(std::net::TcpStream)) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/challenge", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(200));
            treat(stream);
        });
        url
    }

    /// Each way an established connection breaks is recorded as that way: closed with no
    /// answer, reset (closed with the request unread), the answer cut off.
    #[tokio::test]
    async fn a_broken_connection_is_recorded_as_the_way_it_broke() {
        use std::io::{Read, Write};
        let client = reqwest::Client::new();
        let envelope = pog_signed::Identity::from_seed([5; 32])
            .seal("pog.test", &"a challenge")
            .unwrap();
        /// Reads what the client sent until it has been quiet for 200 ms.
        fn read_request(stream: &mut std::net::TcpStream) {
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buffer = [0u8; 4096];
            while stream.read(&mut buffer).is_ok_and(|n| n > 0) {}
        }
        let closed = one_connection(|mut stream| read_request(&mut stream));
        let reset = one_connection(drop);
        let cut = one_connection(|mut stream| {
            read_request(&mut stream);
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc")
                .unwrap();
        });
        for (url, says) in [
            (closed, "closed the connection before answering"),
            (reset, "reset the connection before answering"),
            (cut, "answer was cut off"),
        ] {
            let error = post_counted(&client, &url, &envelope, Duration::from_secs(5), 1 << 20)
                .await
                .expect_err("no answer");
            let failure = ExchangeError::from(error).failure();
            assert_eq!(failure.kind, FailureKind::Transport, "{url}");
            assert!(failure.message.contains(says), "{url}: {}", failure.message);
        }
    }

    /// A task of the rounds, boxed to run among others on their runtime.
    pub(crate) type RoundTask<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

    /// Runs `tasks` on a runtime of two workers, as the rounds' is, while another thread
    /// holds `validator`'s registry (a slow database write): whether a third task of that
    /// runtime ran meanwhile. Then lets the registry go and returns what the tasks returned.
    pub(crate) fn ran_while_the_registry_was_held<T: Send + 'static>(
        validator: &Arc<Validator>,
        tasks: Vec<RoundTask<T>>,
    ) -> (bool, Vec<T>) {
        let rounds = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (held, holding) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = {
            let v = validator.clone();
            std::thread::spawn(move || {
                let _registry = v.registry();
                held.send(()).unwrap();
                let _ = released.recv_timeout(Duration::from_secs(10));
            })
        };
        holding.recv().unwrap();
        let running: Vec<_> = tasks.into_iter().map(|t| rounds.spawn(t)).collect();
        let (ran, other) = std::sync::mpsc::channel();
        rounds.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = ran.send(());
        });
        let other_ran = other.recv_timeout(Duration::from_secs(5)).is_ok();
        release.send(()).unwrap();
        holder.join().unwrap();
        let done = running.into_iter().map(|t| rounds.block_on(t).unwrap());
        (other_ran, done.collect())
    }

    /// A round's task that waits for the registry (held meanwhile by another thread: a slow
    /// database write) holds no worker of the rounds' runtime: with two workers and two such
    /// tasks (a challenge storing its record, a health round reading the GPU's records),
    /// another task of that runtime still runs. When the rounds blocked on the registry's
    /// lock on their workers, both workers waited with them, and so did every exchange under
    /// way (its next step sent seconds late under load: docs/protocol.md, "Load").
    #[test]
    fn a_task_waiting_for_the_registry_holds_no_worker_of_the_rounds() {
        let validator = Arc::new(
            Validator::new(Identity::from_seed([9; 32]), Registry::open(None).unwrap()).unwrap(),
        );
        let agent = Identity::from_seed([1; 32]).public_key();
        let claim = pog_proof::wire::GpuClaim {
            uuid: "GPU-w".parse().unwrap(),
            model: "H200 SXM".into(),
            bus_id: "0000:00:06.0".into(),
            simulated: false,
        };
        // An endpoint the validator does not reach (private): each exchange fails at once.
        validator
            .registry()
            .register(&agent, ("http://127.0.0.1:9", None), &[claim], 0, 64)
            .unwrap();
        let gpu = validator.registry().gpu("GPU-w").unwrap().unwrap();
        let (v, g) = (validator.clone(), gpu.clone());
        let challenged: RoundTask<_> = Box::pin(async move {
            let policy = Policy::per_model_default();
            let record = v
                .challenge_registered::<pog_records::Gemm>(&g, &policy, None)
                .await;
            record.map(|r| !r.accepted && r.failure.is_some())
        });
        let (v, g) = (validator.clone(), gpu);
        let health: RoundTask<_> =
            Box::pin(async move { v.collect_health_of(&g).await.map(|_| true) });
        let (other_ran, done) =
            ran_while_the_registry_was_held(&validator, vec![challenged, health]);
        assert!(
            other_ran,
            "the rounds' runtime ran nothing else while its tasks waited for the registry"
        );
        // Once the registry is free, both finish with their records stored (the challenge's
        // failed).
        assert!(done.into_iter().all(|d| d.unwrap()));
        let stored = validator.registry().latest_records("GPU-w", 10).unwrap();
        assert_eq!(stored.len(), 2);
    }

    /// SQL that makes `place`'s store refuse every new record (its disk full, as far as
    /// records go), and SQL that lifts that.
    fn records_refused(place: &Place) -> (&'static str, &'static str) {
        match place {
            Place::Sqlite(_) => (
                "CREATE TRIGGER full_disk BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
                "DROP TRIGGER full_disk;",
            ),
            Place::Postgres(_) => (
                "CREATE FUNCTION refuse_records() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
                 CREATE TRIGGER full_disk BEFORE INSERT ON records FOR EACH ROW EXECUTE FUNCTION refuse_records();",
                "DROP TRIGGER full_disk ON records;",
            ),
        }
    }

    /// The `released` records stored for `uuid`.
    fn releases_on_record(validator: &Validator, uuid: &str) -> Vec<RegistrationRecord> {
        validator
            .registry()
            .records(uuid, 0, 100)
            .unwrap()
            .into_iter()
            .filter_map(|(_, json)| {
                let kind = RegistrationRecord::KIND.wire_kind();
                pog_signed::decode::<RegistrationRecord>(json.as_bytes(), kind).ok()
            })
            .map(|(record, _)| record)
            .filter(|r| r.event == Change::Released)
            .collect()
    }

    /// A release whose record the store refused (released in the registry, then the disk
    /// full) is on record after the next pass, once; one another validator wrote meanwhile
    /// is only noted. Before the registry kept releases until their records were written, the
    /// record was lost for good.
    #[test]
    fn a_release_whose_record_was_lost_is_recorded_by_the_next_pass() {
        for place in Place::all() {
            let validator = Validator::new(Identity::from_seed([9; 32]), place.open()).unwrap();
            let agent = Identity::from_seed([1; 32]).public_key();
            let claim = |uuid: &str| pog_proof::wire::GpuClaim {
                uuid: uuid.parse().unwrap(),
                model: "H200 SXM".into(),
                bus_id: "0000:00:06.0".into(),
                simulated: false,
            };
            validator
                .registry()
                .register(
                    &agent,
                    ("http://a", None),
                    &[claim("GPU-r"), claim("GPU-s")],
                    0,
                    64,
                )
                .unwrap();
            let (refuse, allow) = records_refused(&place);
            place.execute(refuse);
            let bar = Duration::from_secs(60);
            for uuid in ["GPU-r", "GPU-s"] {
                assert!(
                    validator.release(uuid, "failing", bar).is_err(),
                    "{}",
                    place.name()
                );
                assert_eq!(validator.registry().gpu(uuid).unwrap(), None, "released");
            }
            place.execute(allow);
            // A kept row another pog's record format wrote, first in line: left kept, and it
            // stops no release after it.
            place.execute(
                "INSERT INTO unrecorded_releases (record_id, gpu_uuid, at_ms, record) VALUES ('registration-odd', 'GPU-x', 0, 'not a record')",
            );
            // Another validator of the fleet wrote GPU-s's meanwhile, under its kept id.
            let kept = validator.registry().unrecorded_releases().unwrap();
            let other = kept
                .iter()
                .find(|r| r.record.gpu_uuid.as_str() == "GPU-s")
                .unwrap();
            validator
                .store((&other.record_id, None), false, &other.record)
                .unwrap();
            assert_eq!(validator.record_releases().unwrap(), 1, "{}", place.name());
            for uuid in ["GPU-r", "GPU-s"] {
                let on_record = releases_on_record(&validator, uuid);
                assert_eq!(on_record.len(), 1, "{}: {uuid}", place.name());
                assert_eq!(on_record[0].reason.as_deref(), Some("failing"));
                assert_eq!(on_record[0].agent, agent);
            }
            // Written once: the next pass finds nothing left.
            assert_eq!(validator.record_releases().unwrap(), 0);
            assert_eq!(releases_on_record(&validator, "GPU-r").len(), 1);
        }
    }
}
