//! The messages agents and validators exchange. Each travels signed in a `pog_signed`
//! envelope under its [`kind`] and is read through `pog_signed::decode`, which bounds the
//! size and checks the signature before a body is parsed.

use crate::challenge::Challenge;
use crate::prover::Opening;
use pog_signed::{GpuUuid, PublicKey};
use serde::{Deserialize, Serialize};

/// The message kinds.
pub mod kind {
    /// Agent → validator: the agent's endpoint and the GPUs it claims ([`Register`](super::Register)).
    pub const REGISTER: &str = "register";
    /// Validator → agent: a GEMM challenge ([`ChallengeMessage`](super::ChallengeMessage)).
    pub const CHALLENGE: &str = "challenge";
    /// Agent → validator: the committed root ([`Commitment`](super::Commitment)).
    pub const COMMITMENT: &str = "commitment";
    /// Validator → agent: the leaves to open ([`OpenRequest`](super::OpenRequest)).
    pub const OPEN: &str = "open";
    /// Agent → validator: the opened leaves with their proofs ([`Openings`](super::Openings)).
    pub const OPENINGS: &str = "openings";
    /// Validator → agent: a memory challenge's data set to build ([`MemoryChallengeMessage`](super::MemoryChallengeMessage)).
    pub const MEMORY_CHALLENGE: &str = "memory-challenge";
    /// Agent → validator: the data set is built ([`MemoryReady`](super::MemoryReady)).
    pub const MEMORY_READY: &str = "memory-ready";
    /// Validator → agent: the walk nonce, starting the timed walk ([`WalkMessage`](super::WalkMessage)).
    pub const MEMORY_WALK: &str = "memory-walk";
    /// Validator → agent: a CPU challenge's calibration lane to run ([`CpuChallengeMessage`](super::CpuChallengeMessage)).
    pub const CPU_CHALLENGE: &str = "cpu-challenge";
    /// Agent → validator: the calibration lane ran ([`MemoryReady`](super::MemoryReady)).
    pub const CPU_READY: &str = "cpu-ready";
    /// Validator → agent: the start nonce of the timed lanes ([`WalkMessage`](super::WalkMessage)).
    pub const CPU_START: &str = "cpu-start";
    /// Validator → agent: summarize a GPU's health over a window ([`HealthRequest`](super::HealthRequest)).
    pub const HEALTH_REQUEST: &str = "health-request";
    /// Agent → validator: its telemetry of that GPU over the window ([`HealthSummary`](super::HealthSummary)).
    pub const HEALTH_SUMMARY: &str = "health-summary";
}

/// One GPU an agent claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClaim {
    /// The GPU's UUID, as NVML reports it.
    pub uuid: GpuUuid,
    /// Database model name, e.g. "H200 SXM".
    pub model: String,
    /// The GPU's PCI address, e.g. "00000000:00:06.0"; challenges bind it.
    pub bus_id: String,
    /// True for a GPU of the simulated test double (`pog agent --simulate`): validators refuse
    /// it unless told to accept simulated GPUs, and mark its records SIMULATED.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

/// Agent → validator: who I am, where I answer, which GPUs I claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The agent's base URL for challenges.
    pub endpoint: String,
    /// The GPUs it claims and will answer challenges for.
    pub gpus: Vec<GpuClaim>,
    /// What it claims of its host (its cores are proven by the proof of CPU); none from an
    /// agent older than that proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostClaim>,
}

/// What an agent claims of the host its GPUs are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostClaim {
    /// Hardware threads the host gives the proof of CPU: one lane each
    /// (1 to `pog_proof::cpu::MAX_LANES`).
    pub cores: u32,
}

/// Validator → agent: a challenge of any kind (`C`: the GEMM [`Challenge`], the memory
/// proof's [`crate::memory::MemoryChallenge`]). Where the kind's exchange is timed from the
/// challenge (GEMM), the agent computes and commits; where it sets up first (memory), the
/// agent gets ready (untimed, by `expires_at_ms`) and answers [`MemoryReady`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeMessage<C = Challenge> {
    /// Unique per challenge, hex.
    pub id: String,
    /// What to compute (or set up for).
    pub challenge: C,
    /// When the validator issued it (its clock, Unix ms).
    pub issued_at_ms: u64,
    /// The validator's clock: the agent must not answer after this.
    pub expires_at_ms: u64,
}

/// Validator → agent: build this memory challenge's data set (the untimed phase), and say
/// when it is ready.
pub type MemoryChallengeMessage = ChallengeMessage<crate::memory::MemoryChallenge>;

/// Validator → agent: run this CPU challenge's calibration lane (the set-up phase, timed by
/// the validator), and say when it is done.
pub type CpuChallengeMessage = ChallengeMessage<crate::cpu::CpuChallenge>;

/// Agent → validator: the set-up phase is done (a memory challenge's data set is built).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReady {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The GPU that built it (UUID).
    pub gpu_uuid: GpuUuid,
    /// The agent's own build time (reported; the validator trusts only its clock).
    pub build_ms: f64,
}

/// Validator → agent: start the timed phase with this nonce and commit (a memory challenge:
/// walk the data set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkMessage {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// Fresh randomness sent only now: nothing about the walk is known while building.
    #[serde(with = "hex::serde")]
    pub walk_nonce: [u8; 32],
    /// When the validator sent the nonce (its clock, Unix ms): the timed phase starts here.
    pub issued_at_ms: u64,
    /// The validator's clock: the commitment must arrive by then.
    pub expires_at_ms: u64,
}

/// Agent → validator: the committed root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commitment {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The GPU that computed it (UUID).
    pub gpu_uuid: GpuUuid,
    /// Merkle root over all leaves, hex.
    pub root: String,
    /// Leaves under the root; the validator checks it against the challenge's shape.
    pub leaf_count: u64,
    /// The agent's own measurement (reported; the validator trusts only its clock).
    pub agent_ms: f64,
}

/// Validator → agent: open these leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The leaves to open, drawn after the commitment.
    pub leaves: Vec<u64>,
}

/// One opened leaf on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireOpening {
    /// The leaf's index in the commitment.
    pub leaf: u64,
    /// Leaf bytes, hex.
    pub bytes: String,
    /// Inclusion proof, bottom-up, hex hashes.
    pub proof: Vec<String>,
}

impl From<&Opening> for WireOpening {
    fn from(o: &Opening) -> Self {
        WireOpening {
            leaf: o.leaf,
            bytes: hex::encode(&o.bytes),
            proof: o.proof.iter().map(hex::encode).collect(),
        }
    }
}

/// Why an opened leaf on the wire could not be read.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum OpeningError {
    /// The leaf's bytes are not hex.
    #[error("leaf {leaf}: its bytes are not hex: {cause}")]
    Bytes {
        /// The leaf opened.
        leaf: u64,
        /// Why its bytes are not hex.
        cause: hex::FromHexError,
    },
    /// A hash of the inclusion proof is not 32 bytes of hex.
    #[error("leaf {leaf}: proof hash {index} is not 32 bytes in hex: {cause}")]
    ProofHash {
        /// The leaf opened.
        leaf: u64,
        /// Which hash of the proof, from the bottom.
        index: usize,
        /// Why it is not a hash.
        cause: hex::FromHexError,
    },
}

impl TryFrom<&WireOpening> for Opening {
    type Error = OpeningError;
    fn try_from(w: &WireOpening) -> Result<Self, OpeningError> {
        let mut bytes = vec![0u8; w.bytes.len() / 2];
        decode_hex(&w.bytes, &mut bytes).map_err(|cause| OpeningError::Bytes {
            leaf: w.leaf,
            cause,
        })?;
        let proof = w
            .proof
            .iter()
            .enumerate()
            .map(|(index, h)| {
                let mut hash = [0u8; 32];
                decode_hex(h, &mut hash).map_err(|cause| OpeningError::ProofHash {
                    leaf: w.leaf,
                    index,
                    cause,
                })?;
                Ok(hash)
            })
            .collect::<Result<_, _>>()?;
        Ok(Opening {
            leaf: w.leaf,
            bytes,
            proof,
        })
    }
}

/// Each ASCII character's value as a hex digit, 0xff for none.
const HEX_DIGITS: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// `hex::decode_to_slice` with a fast path for valid input. A challenge's openings are 8 MiB
/// of hex digits (1024 leaves of 4 KiB and their proofs): with the `hex` crate's loop (a
/// branch and an error position per digit) decoding, hashing and proving them took 50 ms of
/// the validator's 100 ms budget, with this 13 ms (examples/verify_cost.rs, development VM).
/// Here each digit is a table lookup, and a bad digit anywhere sends the input back to `hex`
/// for its precise error.
fn decode_hex(hex: &str, out: &mut [u8]) -> Result<(), hex::FromHexError> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * out.len() {
        return hex::decode_to_slice(digits, out);
    }
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (HEX_DIGITS[pair[0] as usize], HEX_DIGITS[pair[1] as usize]);
        invalid |= high | low;
        *byte = high << 4 | low;
    }
    if invalid > 0xf {
        return hex::decode_to_slice(digits, out);
    }
    Ok(())
}

/// Agent → validator: the requested leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Openings {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The requested leaves, in the order asked.
    pub openings: Vec<WireOpening>,
}

/// The longest window a health request may name: the agent keeps this much recent history
/// in memory.
pub const MAX_HEALTH_WINDOW_MS: u64 = 3_600_000;
/// The most signals a health summary may list.
pub const MAX_HEALTH_SIGNALS: usize = 32;
/// The most alerts a health summary may list.
pub const MAX_HEALTH_ALERTS: usize = 64;
/// The most XID codes a health summary may list.
pub const MAX_HEALTH_XIDS: usize = 64;

/// Validator → agent: summarize this GPU's health over `[from_ms, to_ms]` (the validator's
/// clock, Unix ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthRequest {
    /// Unique per request, hex; the summary answers it by this id.
    pub id: String,
    /// The GPU to summarize (UUID).
    pub gpu_uuid: GpuUuid,
    /// The agent asked (its public key): a request is worthless to any other agent.
    pub agent_key: PublicKey,
    /// Start of the window (the validator's clock, Unix ms).
    pub from_ms: u64,
    /// End of the window (the validator's clock, Unix ms).
    pub to_ms: u64,
    /// When the validator issued the request (its clock, Unix ms).
    pub issued_at_ms: u64,
}

/// Why a [`HealthRequest`]'s window is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadHealthWindow {
    /// The window ends where or before it starts.
    #[error("the window [{from_ms}, {to_ms}] ms is empty or reversed")]
    Empty {
        /// Its start (Unix ms).
        from_ms: u64,
        /// Its end (Unix ms).
        to_ms: u64,
    },
    /// The window is longer than [`MAX_HEALTH_WINDOW_MS`].
    #[error("the window spans {0} ms, at most {MAX_HEALTH_WINDOW_MS} ms")]
    TooLong(u64),
}

impl HealthRequest {
    /// Refuses an empty, reversed or too long window.
    pub fn check(&self) -> Result<(), BadHealthWindow> {
        if self.to_ms <= self.from_ms {
            return Err(BadHealthWindow::Empty {
                from_ms: self.from_ms,
                to_ms: self.to_ms,
            });
        }
        if self.to_ms - self.from_ms > MAX_HEALTH_WINDOW_MS {
            return Err(BadHealthWindow::TooLong(self.to_ms - self.from_ms));
        }
        Ok(())
    }
}

/// One signal over the window: its least, mean and largest value over `n` samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalSummary {
    /// Least value over the window.
    pub min: f64,
    /// Mean value over the window.
    pub mean: f64,
    /// Largest value over the window.
    pub max: f64,
    /// Samples taken in the window.
    pub n: u64,
}

/// One alert the agent's detectors raised in the window: when (Unix ms), what and how bad,
/// as identifiers only (no free text reaches a validator's public record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthAlert {
    /// When it was raised (the agent's clock, Unix ms).
    pub t_ms: u64,
    /// What the detector saw, as an identifier.
    pub kind: String,
    /// How bad, as an identifier (e.g. `warn`).
    pub severity: String,
}

/// Agent → validator: its own telemetry of one GPU over the requested window (self-reported:
/// signed by the agent, which a modified agent can fill with anything).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSummary {
    /// The id of the request it answers.
    pub request_id: String,
    /// The GPU summarized (UUID).
    pub gpu_uuid: GpuUuid,
    /// Start of the window, as requested (Unix ms).
    pub from_ms: u64,
    /// End of the window, as requested (Unix ms).
    pub to_ms: u64,
    /// The agent serves the simulated test double: no GPU was sampled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// Samples taken in the window.
    pub samples: u64,
    /// Per signal (trace-column names: `temp_gpu`, `power_w`, …), over the samples that read it.
    pub signals: std::collections::BTreeMap<String, SignalSummary>,
    /// The alerts raised in the window, oldest first (at most [`MAX_HEALTH_ALERTS`]).
    pub alerts: Vec<HealthAlert>,
    /// All alerts raised in the window, listed or not.
    pub alerts_total: u64,
    /// XID codes seen in the window, oldest first (at most [`MAX_HEALTH_XIDS`]).
    pub xids: Vec<u32>,
    /// All XIDs seen in the window, listed or not.
    pub xid_total: u64,
}

/// An identifier a summary may carry: 1-40 characters of `a-z`, `0-9` and `_`.
fn is_identifier(s: &str) -> bool {
    (1..=40).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Why a [`HealthSummary`] does not answer its request, or is malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadHealthSummary {
    /// It answers another request.
    #[error("answers request {answers}, not {asked}")]
    OtherRequest {
        /// The request id it answers.
        answers: String,
        /// The request id asked.
        asked: String,
    },
    /// It summarizes another GPU.
    #[error("summarizes GPU {summarized}, not {asked}")]
    OtherGpu {
        /// The GPU it summarizes.
        summarized: GpuUuid,
        /// The GPU asked about.
        asked: GpuUuid,
    },
    /// It covers another window: (from, to) covered and asked, Unix ms.
    #[error(
        "covers [{}, {}] ms, not the window asked [{}, {}] ms",
        .covers.0, .covers.1, .asked.0, .asked.1
    )]
    OtherWindow {
        /// The window it covers.
        covers: (u64, u64),
        /// The window asked.
        asked: (u64, u64),
    },
    /// It lists more signals, alerts or XIDs than a summary may.
    #[error(
        "lists {signals} signals, {alerts} alerts and {xids} XIDs (at most {MAX_HEALTH_SIGNALS}, \
         {MAX_HEALTH_ALERTS} and {MAX_HEALTH_XIDS})"
    )]
    TooLong {
        /// Signals listed.
        signals: usize,
        /// Alerts listed.
        alerts: usize,
        /// XIDs listed.
        xids: usize,
    },
    /// A signal's name is not an identifier.
    #[error("a signal name is not an identifier")]
    SignalName,
    /// A signal's figures are not a summary of the summary's samples.
    #[error(
        "signal {name}: min {} mean {} max {} over {} samples is not a summary of {samples} samples",
        .signal.min, .signal.mean, .signal.max, .signal.n
    )]
    Signal {
        /// The signal's name.
        name: String,
        /// Its figures.
        signal: SignalSummary,
        /// The samples the summary took.
        samples: u64,
    },
    /// An alert's kind or severity is not an identifier.
    #[error("an alert's kind or severity is not an identifier")]
    AlertName,
    /// An alert lies outside the window (when it was raised, Unix ms).
    #[error("an alert at {0} ms lies outside the window")]
    AlertOutside(u64),
    /// A total is smaller than what is listed.
    #[error("a total is smaller than what is listed")]
    Totals,
}

impl HealthSummary {
    /// Checks that the summary answers `request` and is well formed: same id, GPU and window,
    /// bounded lists, identifiers only, finite and ordered figures, totals at least what is
    /// listed, alerts inside the window.
    pub fn check(&self, request: &HealthRequest) -> Result<(), BadHealthSummary> {
        if self.request_id != request.id {
            return Err(BadHealthSummary::OtherRequest {
                answers: self.request_id.clone(),
                asked: request.id.clone(),
            });
        }
        if self.gpu_uuid != request.gpu_uuid {
            return Err(BadHealthSummary::OtherGpu {
                summarized: self.gpu_uuid.clone(),
                asked: request.gpu_uuid.clone(),
            });
        }
        if (self.from_ms, self.to_ms) != (request.from_ms, request.to_ms) {
            return Err(BadHealthSummary::OtherWindow {
                covers: (self.from_ms, self.to_ms),
                asked: (request.from_ms, request.to_ms),
            });
        }
        if self.signals.len() > MAX_HEALTH_SIGNALS
            || self.alerts.len() > MAX_HEALTH_ALERTS
            || self.xids.len() > MAX_HEALTH_XIDS
        {
            return Err(BadHealthSummary::TooLong {
                signals: self.signals.len(),
                alerts: self.alerts.len(),
                xids: self.xids.len(),
            });
        }
        for (name, s) in &self.signals {
            if !is_identifier(name) {
                return Err(BadHealthSummary::SignalName);
            }
            let finite = s.min.is_finite() && s.mean.is_finite() && s.max.is_finite();
            if !finite || s.min > s.mean || s.mean > s.max || s.n == 0 || s.n > self.samples {
                return Err(BadHealthSummary::Signal {
                    name: name.clone(),
                    signal: *s,
                    samples: self.samples,
                });
            }
        }
        for a in &self.alerts {
            if !is_identifier(&a.kind)
                || !matches!(a.severity.as_str(), "info" | "warning" | "critical")
            {
                return Err(BadHealthSummary::AlertName);
            }
            if a.t_ms < self.from_ms || a.t_ms > self.to_ms {
                return Err(BadHealthSummary::AlertOutside(a.t_ms));
            }
        }
        if self.alerts_total < self.alerts.len() as u64 || self.xid_total < self.xids.len() as u64 {
            return Err(BadHealthSummary::Totals);
        }
        Ok(())
    }
}

#[cfg(test)]
mod health_tests {
    use super::*;

    fn request() -> HealthRequest {
        HealthRequest {
            id: "ab".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            agent_key: pog_signed::Identity::from_seed([0; 32]).public_key(),
            from_ms: 1_000,
            to_ms: 61_000,
            issued_at_ms: 61_000,
        }
    }

    fn summary() -> HealthSummary {
        HealthSummary {
            request_id: "ab".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            from_ms: 1_000,
            to_ms: 61_000,
            simulated: false,
            samples: 60,
            signals: [(
                "temp_gpu".to_string(),
                SignalSummary {
                    min: 30.0,
                    mean: 40.0,
                    max: 70.0,
                    n: 60,
                },
            )]
            .into(),
            alerts: vec![HealthAlert {
                t_ms: 2_000,
                kind: "xid".into(),
                severity: "critical".into(),
            }],
            alerts_total: 1,
            xids: vec![79],
            xid_total: 1,
        }
    }

    #[test]
    fn a_summary_round_trips_signed_and_checks_against_its_request() {
        let id = pog_signed::Identity::from_seed([9; 32]);
        let bytes =
            serde_json::to_vec(&id.seal(kind::HEALTH_SUMMARY, &summary()).unwrap()).unwrap();
        let (back, signer): (HealthSummary, PublicKey) =
            pog_signed::decode(&bytes, kind::HEALTH_SUMMARY).unwrap();
        assert_eq!(back, summary());
        assert_eq!(signer, id.public_key());
        back.check(&request()).unwrap();
        request().check().unwrap();
    }

    #[test]
    fn bad_windows_and_bad_summaries_are_refused() {
        let mut r = request();
        r.to_ms = r.from_ms;
        assert!(r.check().unwrap_err().to_string().contains("empty"));
        r.to_ms = r.from_ms + MAX_HEALTH_WINDOW_MS + 1;
        assert!(r.check().unwrap_err().to_string().contains("at most"));
        type Change = fn(&mut HealthSummary);
        let cases: [(&str, Change); 8] = [
            ("answers request", |s| s.request_id = "cd".into()),
            ("summarizes GPU", |s| s.gpu_uuid = "GPU-2".parse().unwrap()),
            ("not the window", |s| s.to_ms += 1),
            ("not a summary", |s| {
                s.signals.get_mut("temp_gpu").unwrap().min = 50.0;
            }),
            ("not a summary", |s| {
                s.signals.get_mut("temp_gpu").unwrap().n = 61
            }),
            ("not an identifier", |s| {
                s.alerts[0].kind = "Buy now!".into()
            }),
            ("outside the window", |s| s.alerts[0].t_ms = 62_000),
            ("smaller than", |s| s.xid_total = 0),
        ];
        for (expected, change) in cases {
            let mut s = summary();
            change(&mut s);
            let err = s.check(&request()).unwrap_err().to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
        let mut s = summary();
        s.signals.insert("Not A Name".into(), s.signals["temp_gpu"]);
        assert!(s
            .check(&request())
            .unwrap_err()
            .to_string()
            .contains("not an identifier"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn openings_round_trip_through_hex() {
        let o = Opening {
            leaf: 5,
            bytes: vec![1, 2, 3],
            proof: vec![[9; 32], [8; 32]],
        };
        let w = WireOpening::from(&o);
        assert_eq!(Opening::try_from(&w).unwrap(), o);
        let bad_hash = WireOpening {
            proof: vec![hex::encode([9; 32]), "zz".into()],
            ..w.clone()
        };
        assert_eq!(
            Opening::try_from(&bad_hash),
            Err(OpeningError::ProofHash {
                leaf: 5,
                index: 1,
                cause: hex::FromHexError::InvalidStringLength
            })
        );
        let odd = WireOpening {
            bytes: "010".into(),
            ..w
        };
        assert_eq!(
            Opening::try_from(&odd),
            Err(OpeningError::Bytes {
                leaf: 5,
                cause: hex::FromHexError::OddLength
            })
        );
    }

    proptest! {
        /// The decoder never panics, whatever arrives.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = pog_signed::decode::<ChallengeMessage>(&bytes, kind::CHALLENGE);
            let _ = pog_signed::decode::<Openings>(&bytes, kind::OPENINGS);
        }

        /// The fast decoder agrees with the `hex` crate on every input, errors included: a bad
        /// digit somewhere, an odd length, an output of the wrong size.
        #[test]
        fn decode_hex_agrees_with_the_hex_crate(
            mut digits in "[0-9a-fA-F]{0,65}",
            bad in proptest::option::of((any::<usize>(), "[g-z ]")),
            short in 0usize..2,
        ) {
            if let Some((at, c)) = bad.filter(|_| !digits.is_empty()) {
                let at = at % digits.len();
                digits.replace_range(at..=at, &c);
            }
            let len = (digits.len() / 2).saturating_sub(short);
            let (mut fast, mut reference) = (vec![0; len], vec![0; len]);
            let expected = hex::decode_to_slice(&digits, &mut reference);
            prop_assert_eq!(decode_hex(&digits, &mut fast), expected);
            if expected.is_ok() {
                prop_assert_eq!(fast, reference);
            }
        }
    }
}
