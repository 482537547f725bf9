//! The agent's HTTP API in one router: the proofs' endpoints ([`crate::agent`]'s GEMM, memory
//! CPU and RAM, [`crate::storage_api`]'s storage), its health and its metrics.

use crate::agent::{
    challenge, cpu_calibrate, cpu_start, health, memory_build, memory_walk, metrics, open,
    ram_build, ram_walk, Agent,
};
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// The agent's HTTP API: `GET /v1/ping`, `POST /v1/challenge`, `POST /v1/memory/build`,
/// `POST /v1/memory/walk`, `POST /v1/cpu/calibrate`, `POST /v1/cpu/start`, the proof of
/// RAM's `POST /v1/ram/build` and `POST /v1/ram/walk`, `POST /v1/open`,
/// the proof of storage's `POST /v1/storage/{dataset,audit,round,open}`
/// ([`crate::storage`]), `POST /v1/health`, `GET /metrics`.
pub fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/v1/ping", get(|| async { "pog agent" }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/challenge", post(challenge))
        .route("/v1/memory/build", post(memory_build))
        .route("/v1/memory/walk", post(memory_walk))
        .route("/v1/cpu/calibrate", post(cpu_calibrate))
        .route("/v1/cpu/start", post(cpu_start))
        .route("/v1/ram/build", post(ram_build))
        .route("/v1/ram/walk", post(ram_walk))
        .route("/v1/open", post(open))
        .merge(crate::storage_api::routes())
        .route("/v1/health", post(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(pog_signed::MAX_MESSAGE_BYTES))
        .with_state(agent)
}
