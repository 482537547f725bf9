//! What pog's two network services, the agent and the validator, share: the hardened server
//! every route runs on ([`serve`]), error responses and hardened clients that fail closed
//! ([`http`]), where a validator may send requests ([`endpoint`]), identity keys on disk
//! ([`keys`]), the wall clock that tests can replace ([`clock`]), the one rate limiter
//! ([`buckets`]), the one lock policy ([`locked`]) and how floats are rounded for logs and JSON
//! ([`rounding`]). Nothing here knows a challenge or a record: the messages are
//! `pog_proof::wire`'s, signed with `pog_signed`.

#![warn(missing_docs)]

pub mod buckets;
pub mod clock;
pub mod endpoint;
pub mod http;
pub mod keys;
pub mod locked;
pub mod rounding;
pub mod serve;
