//! A challenge of any kind, for the code that computes each kind its own way (a prover
//! engine): the one place that names every kind. Everything else is written once over a kind
//! (`pog_records::ProofKind`).

use crate::challenge::{Addressee, Challenge};
use crate::cpu::CpuChallenge;
use crate::memory::MemoryChallenge;

/// What a prover is asked to compute.
#[derive(Debug, Clone, Copy)]
pub enum Task<'a> {
    /// Seeded GEMMs, committed as one Merkle tree (timed from the challenge).
    Gemm(&'a Challenge),
    /// A data set built in memory (untimed), then walked from a fresh nonce (timed).
    Memory(&'a MemoryChallenge),
    /// The host's cores: half the lanes at once (the set-up, timed by the validator), then one lane
    /// per claimed core at once from a fresh nonce (timed). Always run on the CPU.
    Cpu(&'a CpuChallenge),
    /// The host's RAM: the memory proof's data set built in the host's memory (untimed), then
    /// walked from a fresh nonce (timed). Always run on the CPU.
    Ram(&'a MemoryChallenge),
}

impl Task<'_> {
    /// Whom the challenge is for: the GPU that must compute it, its agent and validator.
    pub fn to(&self) -> &Addressee {
        match self {
            Task::Gemm(c) => &c.to,
            Task::Memory(c) | Task::Ram(c) => &c.to,
            Task::Cpu(c) => &c.to,
        }
    }
}
