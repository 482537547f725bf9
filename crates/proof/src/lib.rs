//! The Proof-of-GPU challenge, as pure logic (the protocol is written up in docs/protocol.md).
//!
//! 1. The validator picks a [`Challenge`] for a claimed GPU: a fresh nonce, and a precision and
//!    problem size chosen from the claimed model ([`params`]) so that only that model finishes
//!    in time.
//! 2. The agent computes `batch` seeded GEMMs (inputs from `pog_matgen`, seeds derived from the
//!    nonce and the GPU's UUID), cuts each output into leaves ([`layout`]), and commits to the
//!    Merkle root of all leaves (RFC 6962's tree shape, `pog_merkle::Blake3`'s hashes).
//! 3. After the commitment the validator draws output elements ([`verify::draw_samples`]); the
//!    agent opens the leaves holding them with inclusion proofs; the validator recomputes each
//!    element in f64 and accepts only within the precision's error bound ([`verify`]).
//! 4. The validator also checks its own measured time to commit ([`timing`]).
//!
//! The proof of memory ([`memory`]) is a second challenge kind through the same session: it
//! proves capacity and bandwidth, which separate models the GEMM cannot (an H200 from an H100).
//!
//! The proof of CPU ([`cpu`]) is a third: the host's cores, each running one latency-bound
//! chain at once, timed against one such chain run alone.
//!
//! The proof of storage ([`storage`]) is a fourth, with a session of its own
//! ([`storage::session`]): a data set of the claimed size kept on the claimed storage between
//! rounds, walked at data-dependent positions while the validator's clock runs.
//!
//! The proof of RAM ([`ram`]) is the memory proof's construction on the host's own memory,
//! sized from the RAM the host claims and walked by its CPU.
//!
//! [`prover::CpuProver`] is an honest (and, for tests, a dishonest) prover on the CPU at small
//! sizes; the GPU prover lives with the device layer.
//!
//! The modules build on one another one way, lowest first: [`challenge`] (the challenge, whom
//! it is for and how that is bound into its seeds), [`timing`] and [`soundness`]; [`layout`];
//! [`params`] and [`prover`]; [`verify`]; [`memory`], [`ram`] and [`cpu`]; [`wire`]; and on top [`session`], which
//! runs either challenge kind through one state machine; [`task`] names every kind for the
//! provers that compute each its own way. No module imports one above it
//! (only tests do, to run an exchange end to end).

#![warn(missing_docs)]

pub mod challenge;
pub mod cpu;
pub mod layout;
pub mod memory;
pub mod params;
pub mod prover;
pub mod ram;
pub mod session;
pub mod soundness;
pub mod storage;
pub mod task;
pub mod timing;
pub mod verify;
pub mod wire;

pub use challenge::Challenge;
