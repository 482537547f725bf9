//! The validator's records of the remote proof: one per challenge ([`ProofRecord`]; a GEMM
//! challenge's is a [`Record`], a memory challenge's a [`MemoryRecord`]), each with its
//! outcome or why there was none.

use pog_proof::cpu::CpuChallenge;
use pog_proof::memory::{MemoryChallenge, MemoryRate};
use pog_proof::session::Outcome;
use pog_proof::Challenge;
use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::SignedBody;

/// What the validator signs and stores for each challenge of any kind: what every proof
/// record says, and the kind's own part (`details`, flattened into the same JSON object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProofRecord<D> {
    /// The record format's version.
    pub version: u32,
    /// The challenge's id.
    pub challenge_id: String,
    /// The GPU challenged.
    pub gpu_uuid: GpuUuid,
    /// The agent the GPU is registered to (its public key).
    pub agent: PublicKey,
    /// The GPU's claimed model, as registered.
    pub model: String,
    /// The GPU is the simulated test double: this record proves nothing about any GPU.
    pub simulated: bool,
    /// The policy the challenge was planned and judged under (a test plan proves no model),
    /// as run: the plan's shape and bound filled in.
    pub policy: Policy,
    /// What the kind's records say besides: the challenge as issued, whether the record
    /// speaks for the claimed model.
    #[serde(flatten)]
    pub details: D,
    /// The claimed model's time bound for the timed phase, ms.
    pub expected_ms: f64,
    /// Whether the outcome accepted the proof; false when the exchange failed.
    pub accepted: bool,
    /// The verdict when the exchange completed.
    pub outcome: Option<Outcome>,
    /// Why it did not, when it did not.
    pub failure: Option<Failure>,
    /// The secret the spot checks were drawn from (hex), revealed once they are done, so anyone
    /// can recompute which elements were checked.
    pub spot_check_secret: String,
    /// Bytes of the messages sent to the agent (challenge, start message, open request).
    pub bytes_to_agent: usize,
    /// Bytes of the messages received from the agent (ready, commitment, openings).
    pub bytes_from_agent: usize,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

/// A record of a GEMM challenge.
pub type Record = ProofRecord<GemmDetails>;
/// A record of a memory challenge.
pub type MemoryRecord = ProofRecord<MemoryDetails>;
/// A record of a CPU challenge.
pub type CpuRecord = ProofRecord<CpuDetails>;
/// A record of a RAM challenge.
pub type RamRecord = ProofRecord<RamDetails>;

/// The kind-specific part of a [`ProofRecord`].
pub trait ProofDetails: Serialize + DeserializeOwned {
    /// The kind its records are signed under.
    const KIND: RecordKind;
    /// Whether an accepted record speaks for the claimed model (a per-model plan on a real
    /// GPU; for the GEMM proof, in a precision where the model leads).
    fn proves(&self) -> bool;
    /// The timed phase's work in the kind's own unit (FLOPs of the GEMM proof, bytes read by
    /// the memory proof's walk), from which the validator's clock gives a measured rate;
    /// `None` for a kind whose work is not such a figure.
    fn timed_work(&self) -> Option<f64> {
        None
    }
}

/// What a GEMM challenge's record says besides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmDetails {
    /// Whether this record can speak for the claimed model at all: a per-model plan on a
    /// real GPU, in a precision where the model leads every slower one by at least
    /// `params::MIN_LEAD`.
    pub proves_model: bool,
    /// The claimed model's lead over the nearest slower model in the challenge's precision.
    pub lead: f64,
    /// The challenge as issued (nonce included), so anyone can recompute its products.
    pub challenge: Challenge,
}

/// What a memory challenge's record says besides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryDetails {
    /// Whether an accepted record speaks for the claimed model's memory: a per-model plan on
    /// a real GPU (the data set fills 90 % of the claimed capacity, the bound is the model's
    /// walk rate).
    pub proves_memory: bool,
    /// The challenge: the data set's shape and binding.
    pub memory_challenge: MemoryChallenge,
    /// The walk nonce (hex), sent once the agent reported the data set built.
    pub walk_nonce: String,
    /// The validator's clock from sending the challenge to the agent's "ready", less the
    /// measured round trip (untimed by the bound, under the expiry).
    pub build_ms: Option<f64>,
    /// Where the bound's rate came from (measurement or datasheet).
    pub rate: Option<MemoryRate>,
}

/// What a CPU challenge's record says besides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuDetails {
    /// Whether an accepted record speaks for the host's cores: a real host, not the
    /// simulated test double's.
    pub proves_cores: bool,
    /// The challenge: lanes, steps, segments and binding.
    pub cpu_challenge: CpuChallenge,
    /// The nonce that started the timed lanes (hex), sent once the calibration lanes ran.
    pub start_nonce: String,
    /// The validator's clock over the calibration lanes (the set-up), less the measured round
    /// trip: half the claimed lanes at once (`CpuChallenge::calibration_lanes`).
    pub calibration_ms: Option<f64>,
}

impl CpuDetails {
    /// The timed phase's throughput on the validator's clock, steps a second: what the score
    /// counts of the CPU (`None` without a verdict).
    pub fn steps_per_s(&self, outcome: Option<&Outcome>) -> Option<f64> {
        let ms = outcome?.time.measured_ms;
        (ms > 0.0).then(|| self.cpu_challenge.timed_steps() as f64 / (ms / 1e3))
    }
}

/// What a RAM challenge's record says besides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RamDetails {
    /// Whether an accepted record speaks for the host's RAM: a real host, not the simulated
    /// test double's.
    pub proves_ram: bool,
    /// The challenge: the data set's shape (sized from the claim) and binding, the walk.
    pub ram_challenge: MemoryChallenge,
    /// The walk nonce (hex), sent once the agent reported the data set built.
    pub walk_nonce: String,
    /// The validator's clock from sending the challenge to the agent's "ready", less the
    /// measured round trip: the build, which calibrates the walk's bound
    /// (`pog_proof::ram::bound_after_build`).
    pub build_ms: Option<f64>,
}

impl RamDetails {
    /// The RAM the walk proved, GiB: the data set held over the share of a claim it fills
    /// (`pog_proof::ram::FILL`), which is the claim to within one step's items.
    pub fn proven_gib(&self) -> f64 {
        self.ram_challenge.dataset_bytes() as f64 / pog_proof::ram::FILL / (1u64 << 30) as f64
    }

    /// The walk's item reads on the validator's clock, GB/s: what the score counts of the
    /// RAM's speed (`None` without a verdict).
    pub fn walk_gbs(&self, outcome: Option<&Outcome>) -> Option<f64> {
        let ms = outcome?.time.measured_ms;
        let bytes = self.timed_work()?;
        (ms > 0.0).then(|| bytes / (ms / 1e3) / 1e9)
    }
}

impl ProofDetails for RamDetails {
    const KIND: RecordKind = RecordKind::RamRound;
    fn proves(&self) -> bool {
        self.proves_ram
    }
    fn timed_work(&self) -> Option<f64> {
        Some(self.ram_challenge.reads() as f64 * pog_proof::memory::arx::ITEM_BYTES as f64)
    }
}

impl ProofDetails for CpuDetails {
    const KIND: RecordKind = RecordKind::CpuRound;
    fn proves(&self) -> bool {
        self.proves_cores
    }
}

impl ProofDetails for GemmDetails {
    const KIND: RecordKind = RecordKind::ProofRound;
    fn proves(&self) -> bool {
        self.proves_model
    }
    fn timed_work(&self) -> Option<f64> {
        Some(self.challenge.flops())
    }
}

impl ProofDetails for MemoryDetails {
    const KIND: RecordKind = RecordKind::MemoryRound;
    fn proves(&self) -> bool {
        self.proves_memory
    }
    fn timed_work(&self) -> Option<f64> {
        Some(self.memory_challenge.reads() as f64 * pog_proof::memory::arx::ITEM_BYTES as f64)
    }
}

/// Why an exchange ended without a verdict, as a signed record tells it: a kind to act on
/// and a short message written by the validator. Nothing the agent sent is repeated beyond
/// what the validator's own checks say (a record is public; an agent must not be able to
/// publish text through it, nor learn what a URL inside the validator's network answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// What kind of failure, to act on.
    pub kind: FailureKind,
    /// What happened, in the validator's words.
    pub message: String,
}

/// The kinds of [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing answered at the agent's endpoint.
    Unreachable,
    /// The agent did not answer a request in time.
    Timeout,
    /// The whole exchange ran past its deadline.
    Deadline,
    /// The connection broke part-way, or the answer was too large.
    Transport,
    /// The agent answered with an HTTP error.
    AgentRefused,
    /// The agent's answer was not a valid signed message of the right kind.
    BadMessage,
    /// A valid message that breaks the protocol (wrong challenge, signer or root).
    Protocol,
}

impl FailureKind {
    /// The agent could not be reached at all (as opposed to answering wrongly).
    pub fn is_unreachable(self) -> bool {
        matches!(
            self,
            FailureKind::Unreachable | FailureKind::Timeout | FailureKind::Deadline
        )
    }
}

impl<D: ProofDetails> SignedBody for ProofRecord<D> {
    const KIND: RecordKind = D::KIND;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
