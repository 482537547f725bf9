//! The network services around the proof protocol (`pog_proof`): the agent that answers
//! challenges for its GPUs ([`agent`]) and the validator that registers agents, challenges
//! them, verifies and records the results ([`validator`]). HTTP with axum and reqwest; every
//! body is a signed `pog_proof::wire` envelope. Beside them, the pipelines a provider runs
//! on its own host and the services reuse: the self-challenge ([`selfcheck`], [`hostproof`])
//! and `pog check`'s inspect → bench → prove ([`check`]).

#![warn(missing_docs)]

pub mod agent;
mod buckets;
pub mod check;
pub mod clock;
pub mod endpoint;
pub mod health;
pub mod hostproof;
pub mod http;
pub mod keys;
pub mod ledger;
pub mod locked;
pub mod market;
#[cfg(feature = "test-doubles")]
pub mod misbehaviour;
pub mod pricing;
pub mod provers;
pub mod registry;
pub mod reports;
pub mod rounding;
pub mod schedule;
pub mod selfcheck;
pub mod serve;
pub mod validator;
pub mod watch;
