//! The network services around the proof protocol (`pog_proof`): the agent that answers
//! challenges for its GPUs ([`agent`]) and the validator that registers agents, challenges
//! them, verifies and records the results ([`validator`]). HTTP with axum and reqwest; every
//! body is a signed `pog_proof::wire` envelope.

pub mod agent;
pub mod http;
pub mod keys;
pub mod provers;
pub mod registry;
pub mod selfcheck;
pub mod validator;
