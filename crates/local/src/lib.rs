//! What runs on a GPU host with no network: the prover engines that compute a challenge on
//! the CPU or the GPU ([`provers`]), the self-challenge a validator would run, with its own
//! keys and clock ([`selfcheck`]), every GPU of the host proved that way ([`hostproof`]), and
//! `pog check`'s inspect → bench → prove ([`check`]); the data set the proof of storage walks,
//! kept on disk ([`storage`]). The agent (`pog_agent`) answers remote
//! challenges with the same engines.

#![warn(missing_docs)]

pub mod check;
pub mod hostproof;
pub mod provers;
pub mod selfcheck;
pub mod storage;
