//! `pog agent`: answers challenges for its GPUs. It runs only challenges signed by a validator
//! it trusts, for a GPU it has, computes the product, commits to the root and opens leaves on
//! request. Proofs are computed by a [`ProverEngine`]: the GPU engine on a GPU host, the CPU
//! engine for CI's end-to-end runs and the attack tests. The attack tests' dishonest agents
//! (`crate::misbehaviour`) exist only with the `test-doubles` feature.

use crate::clock::now_ms;
use crate::http::{envelope_response, ApiError};
use crate::provers::{BuiltMemory, ProverEngine, ProverError};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use pog_proof::challenge::Addressee;
use pog_proof::memory::MemoryChallenge;
use pog_proof::prover::Prover;
use pog_proof::wire::{
    self, kind, ChallengeMessage, Commitment, GpuClaim, Identity, OpenRequest, Openings,
    WireOpening,
};
use pog_proof::wire::{MemoryChallengeMessage, MemoryReady, WalkMessage};
use pog_proof::Challenge;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most leaves one open request may ask for (the validator asks for at most 1024).
pub const MAX_OPENINGS: usize = 4096;

/// Tolerated difference between the validator's clock and the agent's.
pub const CLOCK_SKEW_MS: u64 = 60_000;

/// A computed challenge waiting to be opened, with its expiry (validator clock, ms).
type Computed = (Arc<dyn Prover>, u64, String);

/// A built memory data set waiting for its walk nonce.
struct Built {
    dataset: Box<dyn BuiltMemory>,
    challenge: MemoryChallenge,
    /// The build deadline (validator clock): the walk must come before it plus the skew and
    /// the longest walk a validator allows.
    expires_at_ms: u64,
    issuer: String,
}

/// The agent's state.
pub struct Agent {
    identity: Identity,
    trusted_validators: Vec<String>,
    gpus: Vec<GpuClaim>,
    pub(crate) engine: Arc<dyn ProverEngine>,
    /// Computed challenges by id, kept until opened.
    provers: Mutex<HashMap<String, Computed>>,
    /// Memory challenges whose data set is built, by id, until their walk.
    built: Mutex<HashMap<String, Built>>,
    /// Every challenge id taken, with its expiry (validator clock), until it can no longer be
    /// replayed: a captured challenge cannot make the agent compute twice.
    answered: Mutex<HashMap<String, u64>>,
    /// The health monitor of its GPUs (`crate::watch`), and whether `/metrics` is served on
    /// the API's port.
    watch: Option<(Arc<crate::watch::Watch>, bool)>,
    /// A test agent's misbehaviour (never in a release build).
    #[cfg(feature = "test-doubles")]
    pub(crate) cheating: Option<crate::misbehaviour::Cheating>,
}

impl Agent {
    /// An honest agent proving with `engine`.
    pub fn new(
        identity: Identity,
        trusted_validators: Vec<String>,
        gpus: Vec<GpuClaim>,
        engine: Arc<dyn ProverEngine>,
    ) -> Agent {
        Agent {
            identity,
            trusted_validators,
            gpus,
            engine,
            provers: Mutex::new(HashMap::new()),
            built: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
            watch: None,
            #[cfg(feature = "test-doubles")]
            cheating: None,
        }
    }

    /// Answers health requests from `watch` (`POST /v1/health`), and serves its metrics at
    /// `GET /metrics` on the API's port when `metrics_here`.
    pub fn watching(mut self, watch: Arc<crate::watch::Watch>, metrics_here: bool) -> Agent {
        self.watch = Some((watch, metrics_here));
        self
    }

    pub fn public_key(&self) -> String {
        self.identity.public_hex()
    }

    pub fn gpus(&self) -> &[GpuClaim] {
        &self.gpus
    }

    /// The identity answers are signed with.
    fn signer(&self) -> &Identity {
        #[cfg(feature = "test-doubles")]
        if let Some(cheating) = &self.cheating {
            return cheating.signer(&self.identity);
        }
        &self.identity
    }

    /// Refuses a challenge (of either kind) not addressed to this agent by its signer, or for a
    /// GPU it does not have: work done for another agent's key would be credited to that agent
    /// (a relay), work for another issuer is not asked by it.
    fn check_addressed(&self, signer: &str, to: Addressee) -> Result<(), ApiError> {
        if !self.trusted_validators.iter().any(|v| v == signer) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("challenge signed by {signer}, which this agent does not trust"),
            ));
        }
        if to.agent_key != self.identity.public_hex() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "challenge addressed to agent {}, not to this agent ({})",
                    to.agent_key,
                    self.identity.public_hex()
                ),
            ));
        }
        if to.validator_key != signer {
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

    /// Takes a challenge id (before any work, so two copies of one challenge cannot both
    /// run), refusing an expired or already answered one; forgets what can no longer be opened
    /// or replayed.
    fn take_id(&self, id: &str, expires_at_ms: u64) -> Result<(), ApiError> {
        let now = now_ms();
        if now > expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
            return Err(ApiError::new(
                StatusCode::GONE,
                format!("{id} expired at {expires_at_ms} ms (now {now} ms)"),
            ));
        }
        let horizon = now.saturating_sub(CLOCK_SKEW_MS);
        self.provers
            .lock()
            .expect("lock")
            .retain(|_, (_, expires, _)| *expires >= horizon);
        self.built
            .lock()
            .expect("lock")
            .retain(|_, built| built.expires_at_ms >= horizon);
        let mut answered = self.answered.lock().expect("lock");
        answered.retain(|_, expires| *expires >= horizon);
        if answered.insert(id.to_string(), expires_at_ms).is_some() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{id} was already answered"),
            ));
        }
        Ok(())
    }

    /// Computes a challenge with the engine.
    fn compute(&self, challenge: &Challenge) -> Result<Arc<dyn Prover>, ProverError> {
        #[cfg(feature = "test-doubles")]
        if let Some(cheating) = &self.cheating {
            if let Some(replayed) = cheating.replayed() {
                return Ok(replayed);
            }
            let prover = self.engine.prove(&cheating.target(challenge))?.prover;
            cheating.computed(&prover);
            return Ok(prover);
        }
        Ok(self.engine.prove(challenge)?.prover)
    }
}

/// The agent's HTTP API: `GET /v1/ping`, `POST /v1/challenge`, `POST /v1/memory/build`,
/// `POST /v1/memory/walk`, `POST /v1/open`, `POST /v1/health`, `GET /metrics`.
pub fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/v1/ping", get(|| async { "pog agent" }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/challenge", post(challenge))
        .route("/v1/memory/build", post(memory_build))
        .route("/v1/memory/walk", post(memory_walk))
        .route("/v1/open", post(open))
        .route("/v1/health", post(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(wire::MAX_MESSAGE_BYTES))
        .with_state(agent)
}

/// Refuses a challenge this agent cannot take as asked: a malformed shape (400), a version
/// (got, spoken, what) it does not speak (400), or work its prover refuses (413, the reason;
/// asked only of a well-shaped challenge, whose sizes cannot overflow).
fn admit(
    shape: Result<(), impl std::fmt::Display>,
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

async fn challenge(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let (message, signer): (ChallengeMessage, String) = wire::decode(&body, kind::CHALLENGE)?;
    let c = &message.challenge;
    agent.check_addressed(&signer, c.addressee())?;
    admit(
        c.check_shape(),
        (
            c.version,
            pog_proof::challenge::CHALLENGE_VERSION,
            "challenge",
        ),
        || agent.engine.refuses(c),
    )?;
    agent.take_id(&message.id, message.expires_at_ms)?;
    let started = std::time::Instant::now();
    let worker = agent.clone();
    let challenge = c.clone();
    let what = format!("the {} prover failed", agent.engine.name());
    let prover = blocking(what, move || worker.compute(&challenge)).await?;
    #[cfg(feature = "test-doubles")]
    if let Some(cheating) = &agent.cheating {
        cheating.before_commit().await;
    }
    let commitment = Commitment {
        challenge_id: message.id.clone(),
        gpu_uuid: c.gpu_uuid.clone(),
        root: hex::encode(prover.root()),
        leaf_count: prover.leaf_count(),
        agent_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    agent
        .provers
        .lock()
        .expect("lock")
        .insert(message.id, (prover, message.expires_at_ms, signer));
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

/// Builds a memory challenge's data set and answers "ready" (signed).
async fn memory_build(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let (message, signer): (MemoryChallengeMessage, String) =
        wire::decode(&body, kind::MEMORY_CHALLENGE)?;
    let c = &message.challenge;
    agent.check_addressed(&signer, c.addressee())?;
    admit(
        c.check_shape(),
        (
            c.version,
            pog_proof::memory::MEMORY_VERSION,
            "memory challenge",
        ),
        || agent.engine.refuses_memory(c),
    )?;
    agent.take_id(&message.id, message.expires_at_ms)?;
    let started = std::time::Instant::now();
    let worker = agent.clone();
    let challenge = c.clone();
    let what = format!(
        "building the data set on the {} prover failed",
        agent.engine.name()
    );
    let dataset = blocking(what, move || worker.engine.build_memory(&challenge)).await?;
    let ready = MemoryReady {
        challenge_id: message.id.clone(),
        gpu_uuid: c.gpu_uuid.clone(),
        build_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    agent.built.lock().expect("lock").insert(
        message.id,
        Built {
            dataset,
            challenge: c.clone(),
            expires_at_ms: message.expires_at_ms,
            issuer: signer,
        },
    );
    Ok(envelope_response(
        agent.signer().seal(kind::MEMORY_READY, &ready)?,
    ))
}

/// Walks a built data set with the validator's walk nonce and commits (the timed phase).
async fn memory_walk(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let (message, signer): (WalkMessage, String) = wire::decode(&body, kind::MEMORY_WALK)?;
    let now = now_ms();
    if now > message.expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "walk for {} expired at {} ms (now {now} ms)",
                message.challenge_id, message.expires_at_ms
            ),
        ));
    }
    // Walked once, and only for the validator that issued the challenge: a refused request
    // leaves the data set for the issuer.
    let built = {
        let mut built = agent.built.lock().expect("lock");
        match built.get(&message.challenge_id) {
            None => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no data set built for challenge {} (unknown, expired or already walked)",
                        message.challenge_id
                    ),
                ))
            }
            Some(b) if b.issuer != signer => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "challenge {} was issued by another validator",
                        message.challenge_id
                    ),
                ))
            }
            Some(_) => built
                .remove(&message.challenge_id)
                .expect("present: checked under the same lock"),
        }
    };
    let started = std::time::Instant::now();
    let nonce = message.walk_nonce;
    let gpu_uuid = built.challenge.gpu_uuid.clone();
    let dataset = built.dataset;
    let what = format!("the walk on the {} prover failed", agent.engine.name());
    let walked = blocking(what, move || dataset.walk(&nonce)).await?;
    let commitment = Commitment {
        challenge_id: message.challenge_id.clone(),
        gpu_uuid,
        root: hex::encode(walked.prover.root()),
        leaf_count: walked.prover.leaf_count(),
        agent_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    agent.provers.lock().expect("lock").insert(
        message.challenge_id,
        (walked.prover, message.expires_at_ms, signer),
    );
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

async fn open(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let (request, signer): (OpenRequest, String) = wire::decode(&body, kind::OPEN)?;
    if !agent.trusted_validators.contains(&signer) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("open request signed by {signer}, which this agent does not trust"),
        ));
    }
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
        let mut provers = agent.provers.lock().expect("lock");
        let Some((prover, _, issuer)) = provers.get(&request.challenge_id) else {
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
        if let Some(leaf) = request.leaves.iter().find(|&&l| l >= prover.leaf_count()) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "leaf {leaf} is out of range: the commitment has {}",
                    prover.leaf_count()
                ),
            ));
        }
        provers
            .remove(&request.challenge_id)
            .map(|(prover, _, _)| prover)
            .expect("present: checked under the same lock")
    };
    let leaves = request.leaves.clone();
    let openings = blocking("opening leaves failed".into(), move || prover.open(&leaves))
        .await?
        .iter()
        .map(WireOpening::from)
        .collect();
    let answer = Openings {
        challenge_id: request.challenge_id,
        openings,
    };
    Ok(envelope_response(
        agent.signer().seal(kind::OPENINGS, &answer)?,
    ))
}

/// The Prometheus metrics of the agent's GPUs, when it serves them on this port.
async fn metrics(State(agent): State<Arc<Agent>>) -> Result<Response, ApiError> {
    match &agent.watch {
        Some((watch, true)) => Ok(crate::watch::render_metrics(watch)),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent serves no metrics on this port",
        )),
    }
}

/// A trusted validator's request for one GPU's health over a window, answered with the
/// agent's signed summary of it (self-reported telemetry).
async fn health(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let (request, signer): (wire::HealthRequest, String) =
        wire::decode(&body, kind::HEALTH_REQUEST)?;
    if !agent.trusted_validators.contains(&signer) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("health request signed by {signer}, which this agent does not trust"),
        ));
    }
    if request.agent_key != agent.identity.public_hex() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("health request addressed to agent {}", request.agent_key),
        ));
    }
    if now_ms().abs_diff(request.issued_at_ms) > CLOCK_SKEW_MS {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "health request issued at {} ms, now {} ms",
                request.issued_at_ms,
                now_ms()
            ),
        ));
    }
    request
        .check()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
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
async fn blocking<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
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
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error(transparent)]
    Post(#[from] crate::http::PostError),
}

/// The longest wait between two registration attempts.
pub const MAX_REGISTER_BACKOFF: std::time::Duration = std::time::Duration::from_secs(30);

/// Registers with the validator at `validator_url`. While nothing answers there (it is down
/// or starting), it says so through `on_retry` at once and tries again, waiting twice as long
/// each time up to [`MAX_REGISTER_BACKOFF`]; any answer from the validator, a refusal
/// included, ends it.
pub async fn register(
    validator_url: &str,
    identity: &Identity,
    endpoint: &str,
    gpus: &[GpuClaim],
    mut on_retry: impl FnMut(&crate::http::PostError, std::time::Duration),
) -> Result<(), RegisterError> {
    let envelope = identity.seal(
        kind::REGISTER,
        &wire::Register {
            endpoint: endpoint.to_string(),
            gpus: gpus.to_vec(),
        },
    )?;
    let client = reqwest::Client::new();
    let mut wait = std::time::Duration::from_millis(250);
    loop {
        match crate::http::post(
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
