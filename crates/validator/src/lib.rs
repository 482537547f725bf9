//! `pog validator`: registers agents and the GPUs they claim ([`registry`]), challenges each
//! GPU on a schedule ([`schedule`]) through its agent and verifies the answer with its own
//! clock ([`validator`]), asks for and records the GPU's health ([`health`]), takes the
//! agents' signed reports ([`reports`]), keeps every record in its transparency log
//! ([`ledger`]), and scores, prices and trades the GPUs from those records alone ([`pricing`],
//! [`market`]). It links no CUDA: it never computes a challenge, only checks answers.

#![warn(missing_docs)]

pub mod health;
pub mod ledger;
pub mod market;
pub mod pricing;
pub mod registry;
pub mod reports;
pub mod schedule;
pub mod validator;
