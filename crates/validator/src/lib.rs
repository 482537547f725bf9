//! `pog validator`: registers agents and the GPUs they claim ([`registry`]), challenges each
//! GPU on a schedule ([`schedule`]) through its agent and verifies the answer with its own
//! clock ([`validator`]; the host's storage with a data set it keeps: [`storage`]), asks for and records the GPU's health ([`health`]; the latest of
//! every GPU on one page: [`overview`]), takes the
//! agents' signed reports ([`reports`]), keeps every record in its transparency log
//! ([`ledger`]), and scores, prices and trades the GPUs from those records alone ([`pricing`],
//! [`market`], which reads the registry through [`standing`]; [`settlement`] pays leases for
//! the hours proven). It links no CUDA: it never
//! computes a challenge, only checks answers.
//!
//! Each subsystem reaches the records through one narrow seam, [`store::RecordStore`] (the
//! signing key, the registry, the ledger), not through the challenger; [`app`] builds the
//! whole service from its settings, composes every route in one place, runs it and drains it.

#![warn(missing_docs)]

pub mod app;
pub mod client;
pub mod datasets;
pub mod fleet;
pub mod fleet_log;
pub mod health;
pub mod ledger;
pub mod market;
pub mod market_store;
pub mod metrics;
pub mod overview;
mod pg_tls;
pub mod postgres;
pub mod pricing;
pub mod registry;
pub mod registry_model;
pub mod reports;
pub mod rows;
pub mod schedule;
pub mod set_up_pace;
pub mod settlement;
pub mod settlement_store;
pub mod standing;
pub mod storage;
pub mod store;
pub mod validator;
