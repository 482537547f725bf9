//! pog's transparency log: every signed result record (registration, inspection, benchmark,
//! proof round, health, score, price) appended to an RFC 6962 Merkle log on disk, so that
//! nobody, the validator included, can rewrite or drop history unseen.
//!
//! - [`entry`]: the canonical, versioned entry framing around a producer's signed record.
//! - [`store`]: the append-only files, durable (fsync) before an append is acknowledged,
//!   recovered after a crash; O(log n) proofs from stored subtree hashes; group commit.
//! - [`note`], [`checkpoint`]: C2SP signed notes, checkpoints and cosignatures.
//! - [`tiles`]: the C2SP tlog-tiles static layout, and proofs computed from tiles alone.
//! - [`bundle`]: one GPU's records with proofs and a cosigned checkpoint, and their offline
//!   verification with a report naming exactly what was wrong.
//! - [`witness`]: the witness's pure logic: verify consistency, cosign or refuse.
//! - [`witness_service`]: a witness with its state kept durably on disk, per followed log:
//!   what `pog witness cosign` and `pog witness serve` run.
//! - [`monitor`]: a log monitor's logic: each new checkpoint checked against the last one
//!   verified (kept in a state file), every new entry read, alerts on forks, rollbacks,
//!   unknown kinds or signers and GPUs whose rounds stopped.
//! - [`serve`]: the log's tlog-tiles resources and the witness's add-checkpoint endpoint as
//!   pure request → response functions, for any HTTP server.
//!
//! Every parser here returns an error on malformed input; none panics.

#![warn(missing_docs)]

pub mod bundle;
pub mod checkpoint;
pub mod entry;
pub mod monitor;
pub mod note;
pub mod serve;
pub mod store;
pub mod tiles;
pub mod witness;
pub mod witness_service;

pub use pog_merkle::Hash;
