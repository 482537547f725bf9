//! `pog validator`: registers agents and their GPUs, challenges a GPU through its agent,
//! verifies the answer (values, Merkle proofs, its own clock) and stores a signed record.

use crate::http::{post_counted, ApiError};
use crate::registry::{Registry, RegistryError, RECORD_VERSION};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post as post_route};
use axum::Router;
use pog_proof::challenge::CHALLENGE_VERSION;
use pog_proof::session::{Outcome, ValidatorSession};
use pog_proof::wire::{
    self, kind, ChallengeMessage, Commitment, Identity, OpenRequest, Openings, Register,
};
use pog_proof::Challenge;
use pog_spec::{GpuSpec, Precision, SpecDb};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a GPU is challenged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// None: the precision `pog_proof::params::choose_precision` picks for the claimed model.
    pub precision: Option<Precision>,
    pub size: u64,
    pub batch: u32,
    pub leaf_elements: u32,
    /// The claimed model's expected time to commit.
    pub expected_ms: f64,
    pub samples: u32,
    /// How long the agent has to commit.
    pub expiry_ms: u64,
    /// Plan each challenge from the claimed model (`pog_proof::params::plan_in`: size, batch
    /// and expected time for at least `PLANNED_SECONDS` of work, in `precision` if set, else
    /// where the model leads) instead of the fixed `size`, `batch` and `expected_ms` above.
    pub per_model: bool,
}

/// The least work a per-model challenge asks for, in seconds of the claimed model's time.
pub const PLANNED_SECONDS: f64 = 1.0;

/// A challenge's shape for one claimed model, and the time that model should need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    pub precision: Precision,
    pub size: u64,
    pub batch: u32,
    pub leaf_elements: u32,
    pub expected_ms: f64,
}

impl Planned {
    /// The challenge of this shape for the GPU `gpu_uuid` at PCI address `gpu_bus_id`, from
    /// `nonce`.
    pub fn challenge(&self, nonce: [u8; 32], gpu_uuid: &str, gpu_bus_id: &str) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce,
            gpu_uuid: gpu_uuid.into(),
            gpu_bus_id: gpu_bus_id.into(),
            precision: self.precision,
            size: self.size,
            batch: self.batch,
            leaf_elements: self.leaf_elements,
        }
    }
}

impl Policy {
    /// The policy `pog validator --per-model` runs with its default flags: each challenge
    /// planned from the claimed model, 1024-element leaves, 1024 spot checks, a minute to
    /// commit.
    pub fn per_model_default() -> Policy {
        Policy {
            precision: None,
            size: 0,
            batch: 0,
            leaf_elements: pog_proof::params::LEAF_ELEMENTS,
            expected_ms: 0.0,
            samples: 1024,
            expiry_ms: 60_000,
            per_model: true,
        }
    }

    /// How a GPU claimed to be `spec` is challenged under this policy.
    pub fn plan_for(&self, spec: &GpuSpec) -> Result<Planned, ValidatorError> {
        let unknown = || ValidatorError::UnknownModel(spec.model.clone());
        if self.per_model {
            let memory = (spec.memory_gib * (1u64 << 30) as f64) as u64;
            let db = SpecDb::embedded();
            let choice = match self.precision {
                Some(p) => pog_proof::params::lead_in(spec, db, p),
                None => pog_proof::params::choose_precision(spec, db),
            }
            .ok_or_else(unknown)?;
            let plan = pog_proof::params::plan_in(spec, choice, None, PLANNED_SECONDS, memory)
                .ok_or_else(unknown)?;
            return Ok(Planned {
                precision: plan.choice.precision,
                size: plan.size,
                batch: plan.batch,
                leaf_elements: self.leaf_elements,
                expected_ms: plan.expected_ms,
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
        })
    }
}

/// What the validator signs and stores for each challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    pub challenge_id: String,
    pub gpu_uuid: String,
    pub agent: String,
    pub model: String,
    /// The GPU is the simulated test double: this record proves nothing about any GPU.
    pub simulated: bool,
    pub challenge: Challenge,
    pub accepted: bool,
    /// The verdict when the exchange completed.
    pub outcome: Option<Outcome>,
    /// Why it did not, when it did not.
    pub failure: Option<String>,
    /// The secret the spot checks were drawn from (hex), revealed once they are done, so anyone
    /// can recompute which elements were checked.
    pub spot_check_secret: String,
    /// Bytes of the messages sent to the agent (challenge, open request) and received from it
    /// (commitment, openings).
    pub bytes_to_agent: usize,
    pub bytes_from_agent: usize,
    pub recorded_at_ms: u64,
}

/// Why one challenge exchange with an agent ended without a verdict.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error(transparent)]
    Post(#[from] crate::http::PostError),
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error(transparent)]
    Protocol(#[from] pog_proof::session::ProtocolError),
}

/// Why a challenge could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    #[error("no registered GPU {0}")]
    UnknownGpu(String),
    #[error("GPU model {0:?} is not in the database")]
    UnknownModel(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("signing: {0}")]
    Wire(#[from] wire::WireError),
    #[error("bad policy: {0}")]
    Policy(String),
    #[error("the challenge's task failed: {0}")]
    Task(String),
}

impl Policy {
    /// Refuses policies no challenge can be built from.
    pub fn validate(&self) -> Result<(), ValidatorError> {
        if self.size == 0 || self.batch == 0 || self.leaf_elements == 0 || self.samples == 0 {
            return Err(ValidatorError::Policy(
                "size, batch, leaf elements and samples must all be at least 1".into(),
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

/// The validator.
pub struct Validator {
    identity: Identity,
    registry: Mutex<Registry>,
    client: reqwest::Client,
    /// Whether GPUs of the simulated test double may register (tests and tours only).
    accept_simulated: bool,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // The OS always has randomness on the platforms pog runs on; a failure here would mean
    // predictable nonces, so it must not be ignored.
    getrandom::fill(&mut b).expect("operating system randomness");
    b
}

impl Validator {
    pub fn new(identity: Identity, registry: Registry) -> Validator {
        Validator {
            identity,
            registry: Mutex::new(registry),
            // Redirects are refused: an agent's endpoint must not send the validator elsewhere.
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            accept_simulated: false,
        }
    }

    /// Lets GPUs of the simulated test double register (`pog validator --accept-simulated`);
    /// their records say `simulated: true`. Never for a validator whose records mean anything.
    pub fn accepting_simulated(mut self) -> Validator {
        self.accept_simulated = true;
        self
    }

    pub fn public_key(&self) -> String {
        self.identity.public_hex()
    }

    /// Challenges one registered GPU and records the result (accepted, rejected, or failed).
    pub async fn challenge(&self, uuid: &str, policy: &Policy) -> Result<Record, ValidatorError> {
        policy.validate()?;
        let gpu = self
            .registry
            .lock()
            .expect("lock")
            .gpu(uuid)?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        let spec = SpecDb::embedded()
            .by_model(&gpu.model)
            .ok_or_else(|| ValidatorError::UnknownModel(gpu.model.clone()))?;
        let planned = policy.plan_for(spec)?;
        let challenge = planned.challenge(random_bytes(), uuid, &gpu.bus_id);
        let expected_ms = planned.expected_ms;
        let id = hex::encode(random_bytes::<16>());
        let round_trip_ms = self.round_trip(&gpu.endpoint).await;
        let issued_at_ms = now_ms();
        let message = ChallengeMessage {
            id: id.clone(),
            challenge: challenge.clone(),
            issued_at_ms,
            expires_at_ms: issued_at_ms + policy.expiry_ms,
        };
        let secret: [u8; 32] = random_bytes();
        let mut session = ValidatorSession::new(
            message.clone(),
            gpu.agent.clone(),
            expected_ms,
            secret,
            policy.samples,
        );
        let mut bytes = (0usize, 0usize); // to the agent, from the agent
                                          // Past the deadline the answer is worthless anyway; openings get the same time again.
        let answer_timeout = Duration::from_millis(policy.expiry_ms) + Duration::from_secs(10);
        let exchange = async {
            let sent = Instant::now();
            let challenge_envelope = self.identity.seal(kind::CHALLENGE, &message)?;
            let (n, answer) = post_counted(
                &self.client,
                &format!("{}/v1/challenge", gpu.endpoint),
                &challenge_envelope,
                answer_timeout,
            )
            .await?;
            let arrived_ms = issued_at_ms + sent.elapsed().as_millis() as u64;
            bytes = (bytes.0 + n, bytes.1 + answer.len());
            let (commitment, signer): (Commitment, String) =
                wire::decode(&answer, kind::COMMITMENT)?;
            let request: OpenRequest =
                session.on_commitment(&commitment, &signer, arrived_ms, round_trip_ms)?;
            let open_envelope = self.identity.seal(kind::OPEN, &request)?;
            let (n, answer) = post_counted(
                &self.client,
                &format!("{}/v1/open", gpu.endpoint),
                &open_envelope,
                answer_timeout,
            )
            .await?;
            bytes = (bytes.0 + n, bytes.1 + answer.len());
            let (openings, signer): (Openings, String) = wire::decode(&answer, kind::OPENINGS)?;
            Ok(session.on_openings(&openings, &signer)?)
        };
        let result: Result<Outcome, ExchangeError> = exchange.await;
        let record = Record {
            version: RECORD_VERSION,
            challenge_id: id.clone(),
            gpu_uuid: uuid.into(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            challenge,
            accepted: result.as_ref().is_ok_and(|o| o.accepted),
            failure: result.as_ref().err().map(ToString::to_string),
            outcome: result.ok(),
            spot_check_secret: hex::encode(secret),
            bytes_to_agent: bytes.0,
            bytes_from_agent: bytes.1,
            recorded_at_ms: now_ms(),
        };
        let envelope = self.identity.seal("record", &record)?;
        let json = serde_json::to_string(&envelope).map_err(wire::WireError::Encode)?;
        self.registry
            .lock()
            .expect("lock")
            .record(&id, uuid, record.accepted, &json)?;
        Ok(record)
    }

    /// The fastest of three pings to the agent, in milliseconds (0 when it does not answer:
    /// the time bound then gets no allowance). The agent controls how fast it answers, so only
    /// the fastest counts, and `pog_proof::timing` caps what is credited.
    async fn round_trip(&self, endpoint: &str) -> f64 {
        let mut times = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let ok = self
                .client
                .get(format!("{endpoint}/v1/ping"))
                .timeout(Duration::from_secs(5))
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

/// The validator's HTTP API: `POST /v1/register`, `GET /v1/records/{uuid}`.
pub fn router(validator: Arc<Validator>) -> Router {
    Router::new()
        .route("/v1/register", post_route(register))
        .route("/v1/records/{uuid}", get(records))
        .layer(DefaultBodyLimit::max(wire::MAX_MESSAGE_BYTES))
        .with_state(validator)
}

async fn register(State(v): State<Arc<Validator>>, body: Bytes) -> Result<Response, ApiError> {
    let (reg, agent): (Register, String) = wire::decode(&body, kind::REGISTER)?;
    if !reg.endpoint.starts_with("http://") && !reg.endpoint.starts_with("https://") {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("endpoint {:?} is not an http(s) URL", reg.endpoint),
        ));
    }
    for g in &reg.gpus {
        if SpecDb::embedded().by_model(&g.model).is_none() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("GPU {} claims unknown model {:?}", g.uuid, g.model),
            ));
        }
    }
    if let Some(g) = reg.gpus.iter().find(|g| g.simulated) {
        if !v.accept_simulated {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "GPU {} is simulated (a test double, not a GPU): this validator accepts real GPUs only",
                    g.uuid
                ),
            ));
        }
    }
    match v
        .registry
        .lock()
        .expect("lock")
        .register(&agent, &reg.endpoint, &reg.gpus)
    {
        Ok(()) => Ok((
            StatusCode::OK,
            axum::Json(serde_json::json!({ "registered": reg.gpus.len() })),
        )
            .into_response()),
        Err(e @ RegistryError::ClaimedElsewhere { .. }) => {
            Err(ApiError::new(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
        )),
    }
}

/// The most records one page of `GET /v1/records/{uuid}` returns.
pub const MAX_RECORDS_PAGE: usize = 1000;

/// `GET /v1/records/{uuid}?after=ID&limit=N`: a page of query parameters.
#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    after: i64,
    limit: Option<usize>,
}

/// One stored record: its body as a JSON object (to read), and the envelope exactly as the
/// validator signed it (to verify: its `body` string is the signed bytes).
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredRecord {
    pub id: i64,
    pub record: serde_json::Value,
    pub envelope: wire::Envelope,
}

/// What `GET /v1/records/{uuid}` returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct RecordPage {
    pub gpu_uuid: String,
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
    let rows = v
        .registry
        .lock()
        .expect("lock")
        .records(&uuid, page.after, limit)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let full = rows.len() == limit;
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
    let next_after = full.then(|| records.last().map(|r| r.id)).flatten();
    Ok(axum::Json(RecordPage {
        gpu_uuid: uuid,
        records,
        next_after,
    })
    .into_response())
}

/// Challenges the GPUs `uuids` (one agent's) all at the same time, and returns each result in
/// the order they finish. At the same time, so that one GPU registered under several UUIDs
/// must do all their work within one time bound.
pub async fn challenge_together(
    validator: &Arc<Validator>,
    uuids: Vec<String>,
    policy: &Policy,
) -> Vec<(String, Result<Record, ValidatorError>)> {
    let mut round = tokio::task::JoinSet::new();
    let mut task_gpu = HashMap::new();
    for uuid in uuids {
        let (v, p, id) = (validator.clone(), policy.clone(), uuid.clone());
        let task = round.spawn(async move { v.challenge(&id, &p).await });
        task_gpu.insert(task.id(), uuid);
    }
    let mut results = Vec::new();
    while let Some(done) = round.join_next_with_id().await {
        results.push(match done {
            Ok((task, result)) => (task_gpu.remove(&task).unwrap_or_default(), result),
            Err(e) => (
                task_gpu.remove(&e.id()).unwrap_or_default(),
                Err(ValidatorError::Task(e.to_string())),
            ),
        });
    }
    results
}

/// Challenges every registered GPU, then again every `every`, forever; one log line per result.
/// All GPUs of one agent are challenged at the same time: one GPU registered under several
/// UUIDs must then do all their work within one time bound, and fails.
pub async fn run_schedule(validator: Arc<Validator>, every: Duration, policy: Policy) {
    loop {
        let groups = validator
            .registry
            .lock()
            .expect("lock")
            .gpus_by_agent()
            .unwrap_or_default();
        for (_, uuids) in groups {
            for (uuid, result) in challenge_together(&validator, uuids, &policy).await {
                match result {
                    Ok(r) => eprintln!(
                        "pog validator: {uuid}: {}{}",
                        if r.accepted { "accepted" } else { "REJECTED" },
                        r.failure.map(|f| format!(" ({f})")).unwrap_or_default()
                    ),
                    Err(e) => eprintln!("pog validator: {uuid}: not challenged: {e}"),
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}
