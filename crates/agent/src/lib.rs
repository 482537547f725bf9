//! `pog agent`: the service on a GPU host. It answers a trusted validator's GEMM and memory
//! challenges for the GPUs it serves with the host's prover engines ([`agent`]), watches their
//! health and summarizes a window of it when asked ([`watch`]), times its own proofs for its
//! metrics ([`own_timing`]), and makes and sends its signed
//! inspection and benchmark reports ([`reports`]), delivers its GPUs' leases through the
//! operator's hook ([`leases`]), and proves the host's storage with a data set it keeps
//! ([`storage`]). HTTP with axum on `pog_net`'s hardened
//! server; every body is a signed `pog_proof::wire` message.

#![warn(missing_docs)]

pub mod agent;
pub mod leases;
#[cfg(feature = "test-doubles")]
pub mod misbehaviour;
pub mod own_timing;
pub mod reports;
pub mod storage;
pub mod watch;
