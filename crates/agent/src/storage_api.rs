//! The agent's endpoints of the proof of storage (`POST /v1/storage/{dataset,audit,round,open}`,
//! described with the storage they read in [`crate::storage`]): each request checked as the
//! other proofs' are (signed by a trusted validator, addressed to this agent, each id once),
//! then handed to the agent's [`HostStorage`](crate::storage::HostStorage).

use crate::agent::{blocking, Agent};
use crate::storage::{
    Answer, HostStorage, Walked, MAX_BUILD_LIFETIME_MS, MAX_STORAGE_REQUEST_BYTES,
};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use pog_net::http::{envelope_response, ApiError};
use pog_net::locked::Locked;
use pog_proof::storage::session::{
    kind, AuditMessage, AuditOpeningsMessage, BuildingMessage, BuiltMessage, DatasetMessage,
    OpenMessage, OpeningsMessage, RoundMessage, WalkMessage,
};
use pog_proof::storage::MAX_SAMPLES;
use pog_proof::timing::CLOCK_SKEW_MS;
use pog_signed::{Envelope, PublicKey};
use std::sync::Arc;

/// The proof of storage's routes, each body at most [`MAX_STORAGE_REQUEST_BYTES`].
pub(crate) fn routes() -> Router<Arc<Agent>> {
    let limit = || DefaultBodyLimit::max(MAX_STORAGE_REQUEST_BYTES);
    Router::new()
        .route("/v1/storage/dataset", post(dataset).layer(limit()))
        .route("/v1/storage/audit", post(audit).layer(limit()))
        .route("/v1/storage/round", post(round).layer(limit()))
        .route("/v1/storage/open", post(open).layer(limit()))
}

/// The agent's storage, or 404 when it claims none.
fn storage_of(agent: &Agent) -> Result<Arc<HostStorage>, ApiError> {
    agent.storage.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent claims no storage (pog agent --storage-dir)",
        )
    })
}

/// `POST /v1/storage/dataset`: the data set's root when kept, else its build started or
/// polled (module doc).
async fn dataset(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (DatasetMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_DATASET)?;
    agent.check_addressed(&signer, &message.dataset.to)?;
    crate::agent::check_id(&message.id)?;
    let now = agent.now_ms();
    if now > message.expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "data set {} expired at {} ms (now {now} ms)",
                message.id, message.expires_at_ms
            ),
        ));
    }
    if message.expires_at_ms > now.saturating_add(MAX_BUILD_LIFETIME_MS + CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "data set {} expires more than {} h from now",
                message.id,
                MAX_BUILD_LIFETIME_MS / 3_600_000
            ),
        ));
    }
    storage.admit(&message.dataset)?;
    let building = |running_ms, instead| -> Result<Response, ApiError> {
        let sealed = agent.signer().seal(
            kind::STORAGE_BUILDING,
            &BuildingMessage {
                dataset_id: message.id.clone(),
                running_ms,
                instead,
            },
        )?;
        Ok((StatusCode::ACCEPTED, axum::Json(sealed)).into_response())
    };
    // The message as it was signed, offered to a validator asking for another data set while
    // this one builds (decoded above, so it parses).
    let sent: Envelope = serde_json::from_slice(&body).map_err(pog_signed::WireError::Envelope)?;
    match storage.on_dataset(&message, &sent) {
        Answer::Built(root) => Ok(envelope_response(agent.signer().seal(
            kind::STORAGE_BUILT,
            &BuiltMessage {
                dataset_id: message.id.clone(),
                root,
            },
        )?)),
        Answer::Building(running_ms) => building(running_ms, None),
        Answer::BuildingInstead(running_ms, running) => building(running_ms, Some(running)),
        Answer::Failed(reason) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("building the data set failed: {reason}"),
        )),
        Answer::Busy(why) => Err(ApiError::new(StatusCode::CONFLICT, why)),
        Answer::Start => {
            let (worker, set) = (storage.clone(), message.dataset.clone());
            tracing::info!(
                dir = %storage.dir.display(),
                bytes = set.shape.bytes(),
                "building the storage proof's data set"
            );
            let (builder, foreground) = (storage.clone(), agent.foreground.clone());
            let build = tokio::task::spawn_blocking(move || builder.build(&set, foreground));
            let set = message.dataset.clone();
            tokio::spawn(async move {
                let built = match build.await {
                    Ok(Ok(stored)) => Ok(stored),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("the build stopped".to_string()),
                };
                if let Err(why) = &built {
                    tracing::warn!(error = %why, "building the storage proof's data set");
                }
                worker.finish_build(&set, built);
            });
            building(0, None)
        }
    }
}

/// `POST /v1/storage/audit`: the chunks asked of the data set last built for this
/// validator, with their paths.
async fn audit(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (AuditMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_AUDIT)?;
    agent.check_trusted(&signer, "audit request")?;
    check_count(message.chunks.len(), "chunks")?;
    let stored = storage.audited(&message.dataset_id)?;
    let chunks = stored.meta().dataset.shape.chunks();
    if let Some(past) = message.chunks.iter().find(|&&c| c >= chunks) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("chunk {past} is past the data set's {chunks}"),
        ));
    }
    let asked = message.chunks;
    let opened = blocking("opening the audit's chunks failed".into(), move || {
        asked
            .iter()
            .map(|&i| stored.open_chunk(i))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_AUDIT_OPENINGS,
        &AuditOpeningsMessage {
            dataset_id: message.dataset_id,
            chunks: opened,
        },
    )?))
}

/// `POST /v1/storage/round`: walks the kept data set from the round's nonce (the timed
/// phase), keeps the walk for its open request (dropped after the agent's hold).
async fn round(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (RoundMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_ROUND)?;
    agent.check_kept_round(&signer, &message.round.dataset.to)?;
    message
        .round
        .validate()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    agent.take_id(&message.id, message.expires_at_ms)?;
    let (stored, busy) = storage.start_walk(&message.round)?;
    let (reader, round, walker) = (stored.clone(), message.round.clone(), storage.clone());
    let timed = agent.foreground.clone();
    let walk = blocking("walking the data set failed".into(), move || {
        let _busy = busy;
        let _timed = timed.begin();
        walker.walk(&reader, &round)
    })
    .await?;
    storage.state.locked().walked = Some(Arc::new(Walked {
        round_id: message.id.clone(),
        issuer: signer,
        round: message.round,
        walk: walk.clone(),
        stored,
    }));
    let id = message.id.clone();
    agent.after_hold(&tokio::runtime::Handle::current(), move |agent| {
        if let Some(storage) = &agent.storage {
            let mut state = storage.state.locked();
            if state.walked.as_ref().is_some_and(|w| w.round_id == id) {
                state.walked = None;
            }
        }
    });
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_WALK,
        &WalkMessage {
            round_id: message.id,
            walk,
        },
    )?))
}

/// `POST /v1/storage/open`: the walked steps asked, each step's chunk with its path.
async fn open(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (OpenMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_OPEN)?;
    agent.check_trusted(&signer, "open request")?;
    check_count(message.request.steps.len(), "steps")?;
    let walked = storage.take_walk(&message.round_id, &signer)?;
    let steps = walked.round.steps;
    if let Some(past) = message.request.steps.iter().find(|&&t| t >= steps) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("step {past} is past the walk's {steps}"),
        ));
    }
    let request = message.request;
    let openings = blocking("opening the walked steps failed".into(), move || {
        walked
            .stored
            .open_steps(&walked.round, &walked.walk, &request)
    })
    .await?;
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_OPENINGS,
        &OpeningsMessage {
            round_id: message.round_id,
            openings,
        },
    )?))
}

/// Refuses an audit or open request for none, or more than [`MAX_SAMPLES`], of `what`.
fn check_count(n: usize, what: &str) -> Result<(), ApiError> {
    match n {
        0 => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("no {what} asked"),
        )),
        n if n > MAX_SAMPLES as usize => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{n} {what} asked, at most {MAX_SAMPLES}"),
        )),
        _ => Ok(()),
    }
}
