//! A registered GPU's score and price from the validator's own signed records (issue 15): the
//! figures a validator measured or proved itself, not what the agent says of its host.
//!
//! - **The GPU part.** The latest proof record decides whether the GPU counts: accepted under a
//!   plan that proves its model, it counts its model's figures (the spec database's, scaled by
//!   what the reference card reached of its own datasheet: [`crate::report::spec_figures`]);
//!   rejected, failed, accepted under a plan that proves no model, or made for another model
//!   than the one now registered, it counts 0 with the reason.
//! - **Pace.** Each accepted record measured the GPU's compute time against its model's bound
//!   (`outcome.time.ratio`, time over the expected time). The median over the window's
//!   accepted model-proving records, `min(1, 1 / ratio)`, scales the compute figures (tensor,
//!   FP32, sustained): a GPU slower than its model is expected to be counts that much less;
//!   one faster counts no more than its model. Likewise the memory proof's walk, timed by the
//!   validator, scales the bandwidth: the measured walk rate against the model's expected
//!   one. Both measured rates (TFLOP/s of the GEMM proof, GB/s of the walk) are in the
//!   assessment's [`MeasuredWork`], labelled measured.
//! - **Reliability**, over the GPU's last [`RELIABILITY_WINDOW`] rounds by its current agent
//!   (a GPU registered recently: over its own rounds): proofs passed over proofs answered;
//!   uptime, rounds proven over rounds (a round answered wrongly, unanswered or skipped while
//!   the validator backed off is not up: [`crate::evidence`]); anomalies from the health records of those rounds
//!   ([`crate::evidence`]).
//! - **Host parts.** The CPU, RAM and storage count from the latest of the validator's proofs
//!   of them on this GPU (the host's first GPU carries its host's proofs): the timed lanes'
//!   throughput of its `cpu-record`, the walk's reads a second and the data set's size of its
//!   `storage-record`, each on the validator's clock ([`HostProof`]); a latest proof that
//!   failed counts 0 with the reason, as the GPU's own does. RAM counts likewise from the
//!   latest `ram-record`: the claim its data set filled and its walk's reads a second; the
//!   agent's own RAM figures never count here.
//! - **Simulated GPUs** (the test double) score 0 in every part, with the reason
//!   [`crate::score::SIMULATED`], and are never priced.
//!
//! The input is a list of [`RecordSummary`]s, each read from a typed record
//! ([`RecordSummary::of`]); everything here is pure.

use pog_proof::session::Outcome;
use pog_records::{CpuRecord, FailureKind, ProofDetails, ProofRecord, RamRecord, StorageRecord};
use pog_signed::GpuUuid;
use pog_spec::SpecDb;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::evidence::{anomalies, Anomalies, HealthEvidence, MissedRound, Round, Uptime};
use crate::quote::{quote, MarketState, Quote, QuoteError};
use crate::report::spec_figures;
use crate::score::{
    score, simulated, CpuFigures, FigureSource, GpuFigures, HostFigures, ProofStatus, RamFigures,
    ReliabilityFigures, Score, StorageFigures,
};

/// How many of a GPU's latest rounds its reliability is judged over: at the validator's
/// default of a round a minute, its last twenty minutes. Long enough that one unlucky proof
/// does not zero it (19 of 20 is a rate of 0.95, reliability 0.9), short enough that a GPU
/// that starts failing loses its price within minutes.
pub const RELIABILITY_WINDOW: usize = 20;

/// What the score reads of one of the validator's proof records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordSummary {
    /// The record's number in the validator's store (increasing with time).
    pub id: i64,
    /// When the validator stored it, ms since the Unix epoch.
    pub recorded_at_ms: u64,
    /// The model the GPU was challenged as.
    pub model: String,
    /// The agent challenged (its public key).
    #[serde(default)]
    pub agent: Option<String>,
    /// The GPU is the simulated test double.
    pub simulated: bool,
    /// The validator accepted the proof: its spot checks right, within the model's time bound.
    pub accepted: bool,
    /// The record can speak for the model (a per-model plan, a precision where it leads).
    pub proves_model: bool,
    /// The model's expected time for the challenge, ms.
    pub expected_ms: f64,
    /// Measured compute time over the expected time, when the exchange completed.
    pub time_ratio: Option<f64>,
    /// Spot-checked elements that were wrong.
    pub wrong: usize,
    /// Why the exchange ended without a verdict, in the validator's words.
    pub failure: Option<String>,
    /// Its kind (`unreachable`, `timeout`, `agent_refused`, …).
    #[serde(default)]
    pub failure_kind: Option<FailureKind>,
    /// The timed phase's rate on the validator's clock, per second in the kind's unit (FLOP/s
    /// of the GEMM proof, bytes/s of the memory walk), when the exchange completed.
    #[serde(default)]
    pub measured_rate: Option<f64>,
    /// A check during a lease (`Policy::for_lease`): it counts for the GPU's rounds (uptime,
    /// success, the settlement) and never as its model's proof or pace.
    #[serde(default)]
    pub lease_check: bool,
}

impl RecordSummary {
    /// What the score reads of a proof record of any kind: for a memory record, whether it
    /// speaks for the model's memory stands where a GEMM record says whether it speaks for
    /// the model.
    pub fn of<D: ProofDetails>(id: i64, r: &ProofRecord<D>) -> RecordSummary {
        RecordSummary {
            id,
            recorded_at_ms: r.recorded_at_ms,
            model: r.model.to_string(),
            agent: Some(r.agent.to_string()),
            simulated: r.simulated,
            accepted: r.accepted,
            proves_model: r.details.proves(),
            expected_ms: r.expected_ms,
            time_ratio: r.outcome.as_ref().map(|o| o.time.ratio),
            wrong: r.outcome.as_ref().map_or(0, Outcome::wrong),
            failure: r.failure.as_ref().map(|f| f.message.clone()),
            failure_kind: r.failure.as_ref().map(|f| f.kind),
            measured_rate: r.outcome.as_ref().and_then(|o| {
                let seconds = o.time.ratio * r.expected_ms / 1e3;
                let rate = r.details.timed_work()? / seconds;
                (rate.is_finite() && rate > 0.0).then_some(rate)
            }),
            lease_check: r.policy.lease_check,
        }
    }

    /// Whether the agent answered the challenge (rightly or wrongly): not when nothing came
    /// back in time ([`FailureKind::is_unreachable`]).
    pub fn answered(&self) -> bool {
        !self.failure_kind.is_some_and(FailureKind::is_unreachable)
    }

    /// Why this record did not pass, in words.
    pub fn failure_reason(&self) -> String {
        if let Some(why) = &self.failure {
            return why.clone();
        }
        match self.time_ratio {
            Some(r) if self.wrong == 0 => format!("rejected at {r:.2} of its time bound"),
            _ => format!("rejected ({} spot check(s) wrong)", self.wrong),
        }
    }
}

/// What the score reads of one of the validator's proofs of a GPU's host (`cpu-record`,
/// `storage-record`): whether it counts, and its figures, timed by the validator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostProof<F> {
    /// The record's number in the validator's store.
    pub id: i64,
    /// The agent proven (its public key).
    pub agent: String,
    /// Accepted, and by a real host (not the simulated test double): its figures count.
    pub counts: bool,
    /// Its figures on the validator's clock (none without a verdict).
    pub figures: Option<F>,
    /// Why it does not count, in words (none when it does).
    pub failure: Option<String>,
}

impl<F> HostProof<F> {
    /// What the score reads of a proof record of the host with `figures` (its rate on the
    /// validator's clock): counted when accepted by a real host, else why not.
    fn of_record<D: ProofDetails>(id: i64, r: &ProofRecord<D>, figures: Option<F>) -> HostProof<F> {
        let failure = match (&r.failure, &r.outcome) {
            (Some(f), _) => Some(f.message.clone()),
            (None, Some(o)) if !r.accepted => Some(match o.wrong() {
                0 => format!("rejected at {:.2} of its time bound", o.time.ratio),
                n => format!("rejected ({n} spot check(s) wrong)"),
            }),
            _ if r.simulated => Some(crate::score::SIMULATED.to_string()),
            _ => None,
        };
        HostProof {
            id,
            agent: r.agent.to_string(),
            counts: r.accepted && r.details.proves() && failure.is_none(),
            figures,
            failure,
        }
    }
}

impl HostProof<CpuFigures> {
    /// What the score reads of a proof of CPU: its lanes' throughput.
    pub fn of_cpu(id: i64, r: &CpuRecord) -> HostProof<CpuFigures> {
        let figures = r
            .details
            .steps_per_s(r.outcome.as_ref())
            .map(|steps_per_s| CpuFigures::Proven {
                lanes: r.details.cpu_challenge.lanes,
                steps_per_s,
            });
        HostProof::of_record(id, r, figures)
    }
}

impl HostProof<RamFigures> {
    /// What the score reads of a proof of RAM: the walk's reads a second and the RAM its data
    /// set proved.
    pub fn of_ram(id: i64, r: &RamRecord) -> HostProof<RamFigures> {
        let figures = r
            .details
            .walk_gbs(r.outcome.as_ref())
            .map(|walk_gbs| RamFigures::Proven {
                walk_gbs,
                capacity_gib: r.details.proven_gib(),
            });
        HostProof::of_record(id, r, figures)
    }
}

impl HostProof<StorageFigures> {
    /// What the score reads of a proof of storage: the walk's reads a second and the data
    /// set's size.
    pub fn of_storage(id: i64, r: &StorageRecord) -> HostProof<StorageFigures> {
        let figures = r.reads_per_s().map(|reads_per_s| StorageFigures::Proven {
            reads_per_s,
            capacity_gb: r.proven_bytes() as f64 / 1e9,
        });
        let round = r.round.as_ref();
        let failure = match (&r.failure, round, &r.audit) {
            (Some(f), _, _) => Some(f.message.clone()),
            (None, Some(o), _) if !o.accepted => Some(match &o.rejection {
                Some(why) => format!("rejected: {why}"),
                None => format!("rejected at {:.2} of its time bound", o.time.ratio),
            }),
            (None, None, Some(a)) if !a.accepted => Some(format!(
                "its data set failed its audit: {}",
                a.rejection.as_deref().unwrap_or("rejected")
            )),
            _ if r.simulated => Some(crate::score::SIMULATED.to_string()),
            _ => None,
        };
        HostProof {
            id,
            agent: r.agent.to_string(),
            counts: r.accepted && r.proves_storage && failure.is_none(),
            figures,
            failure,
        }
    }
}

/// What the validator knows of one GPU.
#[derive(Debug, Clone, Copy)]
pub struct GpuHistory<'a> {
    /// The GPU's UUID.
    pub uuid: &'a GpuUuid,
    /// The model it is registered as now; `None` once it has left the registry.
    pub registered_model: Option<&'a str>,
    /// The agent it is registered to now (its public key); `None` once it has left the
    /// registry. Only this agent's records count: a new owner is not judged by the rounds of
    /// the key that held the UUID before.
    pub registered_agent: Option<&'a str>,
    /// Registered as the simulated test double.
    pub simulated: bool,
    /// Its latest proof records, oldest first (those of its last [`RELIABILITY_WINDOW`]
    /// rounds count).
    pub records: &'a [RecordSummary],
    /// Its memory-proof records, oldest first: the latest decides whether its memory capacity
    /// and bandwidth count.
    pub memory_records: &'a [RecordSummary],
    /// The rounds the validator's schedule skipped it in, backing off (any order).
    pub missed_rounds: &'a [MissedRound],
    /// Its health records (any order): those recorded in its last rounds are read for
    /// anomalies.
    pub health: &'a [HealthEvidence],
    /// The proofs of its host's CPU, oldest first (on its host's first GPU): the latest
    /// decides.
    pub cpu_proofs: &'a [HostProof<CpuFigures>],
    /// The proofs of its host's RAM, oldest first: the latest decides.
    pub ram_proofs: &'a [HostProof<RamFigures>],
    /// The proofs of its host's storage, oldest first: the latest decides.
    pub storage_proofs: &'a [HostProof<StorageFigures>],
}

/// A GPU's score from the validator's records, with every reason it is less than it could be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// The GPU assessed (its UUID).
    pub gpu_uuid: GpuUuid,
    /// The model scored (the registered one).
    pub model: Option<String>,
    /// The GPU is the simulated test double: everything counts 0 ([`crate::score::SIMULATED`]).
    pub simulated: bool,
    /// The score: the host formula over this GPU alone, its host's CPU and storage as the
    /// validator proved them, RAM not measured.
    pub score: f64,
    /// The GPU's verified worth in reference GPUs, after reliability (0 when not verified):
    /// what a GPU-hour of it is priced on.
    pub gpu_worth: f64,
    /// The id of the latest proof record the assessment rests on.
    pub latest_record: Option<i64>,
    /// Whether that record was accepted.
    pub latest_accepted: Option<bool>,
    /// Its latest proof was accepted and speaks for its registered model (never for the
    /// simulated test double): what the chain's `gpu-state` record carries.
    pub proves_model: bool,
    /// Its latest proof of memory was accepted and speaks for its registered model (never for
    /// the simulated test double).
    pub proves_memory: bool,
    /// Proofs accepted in the window.
    pub proofs_passed: u64,
    /// Proofs answered in the window, rightly or wrongly (an unanswered round counts in
    /// `uptime`, not here).
    pub proofs_total: u64,
    /// The window's uptime; `None` before its first round.
    pub uptime: Option<Uptime>,
    /// The anomalies of the window's health records; `None` without any.
    pub anomalies: Option<Anomalies>,
    /// Median of `min(1, 1 / time ratio)` over the window's accepted model-proving records.
    pub pace: Option<f64>,
    /// What the validator measured of the GPU's work on its own clock, and what it scaled.
    #[serde(default)]
    pub measured: MeasuredWork,
    /// Why the score is 0 or lower than the GPU's model would earn, in words.
    pub reasons: Vec<String>,
    /// The score's parts, reliability and per-GPU figures.
    pub detail: Score,
}

/// What the validator measured of a GPU's work on its own clock over the window's accepted
/// proofs of its model (medians), labelled as measured wherever shown: the GEMM proof's rate
/// and pace, and the memory proof's walk rate and pace. Each pace (`min(1, expected time /
/// time)`) scales its figures: compute by the GEMM's, bandwidth by the walk's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredWork {
    /// The GEMM proof's rate, TFLOP/s (its FLOPs over its time, less the round trip
    /// credited), measured.
    pub gemm_tflops: Option<f64>,
    /// The GEMM proof's pace against its model's expected time, at most 1.
    pub compute_pace: Option<f64>,
    /// The memory proof's walk rate, GB/s of item reads, measured.
    pub walk_gbs: Option<f64>,
    /// The memory proof's pace against its model's expected walk, at most 1.
    pub memory_pace: Option<f64>,
}

/// The median pace `min(1, 1 / ratio)` and measured rate of `records`' accepted, model-proving
/// records of `model`.
fn measured_of(records: &[&RecordSummary], model: Option<&str>) -> (Option<f64>, Option<f64>) {
    let proving: Vec<&&RecordSummary> = records
        .iter()
        .filter(|r| {
            r.accepted && r.proves_model && !r.lease_check && Some(r.model.as_str()) == model
        })
        .collect();
    let paces = proving
        .iter()
        .filter_map(|r| r.time_ratio)
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| (1.0 / r).min(1.0))
        .collect();
    let rates = proving.iter().filter_map(|r| r.measured_rate).collect();
    (median(paces), median(rates))
}

/// The figures of the latest of `proofs` by the current agent (`mine`) when it counts, or
/// why none count (`what`: the host part's name).
fn latest_host_proof<F: Clone>(
    proofs: &[HostProof<F>],
    mine: impl Fn(&str) -> bool,
    what: &str,
) -> Result<F, String> {
    let Some(latest) = proofs.iter().rev().find(|p| mine(&p.agent)) else {
        return Err(format!("{what}: no proof of it by the validator yet"));
    };
    match (&latest.figures, latest.counts) {
        (Some(figures), true) => Ok(figures.clone()),
        _ => Err(format!(
            "{what}: its latest proof failed ({})",
            latest.failure.as_deref().unwrap_or("no verdict")
        )),
    }
}

/// A GPU's rounds as the validator recorded them (record id, round), oldest first: each proof
/// record is a round (proven, failed or unanswered), each missed-round record a round skipped
/// while the schedule backed off (a slot the fleet missed is nobody's round). A round's memory
/// proof follows its GEMM proof (the validator's schedule runs them in turn), so the memory
/// records stored between one proof record and the next are that round's: the round is proven
/// only when they were accepted too. Give it one agent's records (the score and the settlement
/// judge a GPU by its current owner's), each list oldest first.
pub fn rounds_of<'m>(
    proofs: &[&RecordSummary],
    memory: &[&RecordSummary],
    missed: impl Iterator<Item = &'m MissedRound>,
) -> Vec<(i64, Round)> {
    let mut rounds: Vec<(i64, Round)> = proofs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let at_ms = r.recorded_at_ms;
            let next = proofs.get(i + 1).map_or(i64::MAX, |n| n.id);
            let memory_passed = memory
                .iter()
                .filter(|m| m.id > r.id && m.id < next)
                .all(|m| m.accepted);
            let round = if !r.answered() {
                Round::Unanswered { at_ms }
            } else if r.accepted && memory_passed {
                Round::Proven { at_ms }
            } else {
                Round::Failed { at_ms }
            };
            (r.id, round)
        })
        .chain(
            missed
                // A slot the fleet missed is not the GPU's round to have missed.
                .filter(|m| !m.fleet)
                .map(|m| {
                    (
                        m.id,
                        Round::Skipped {
                            at_ms: m.recorded_at_ms,
                        },
                    )
                }),
        )
        .collect();
    rounds.sort_by_key(|(id, _)| *id);
    rounds
}

/// Scores one GPU from its records.
pub fn assess(history: &GpuHistory, config: &Config, db: &SpecDb) -> Assessment {
    // Only the current agent's records (any, once the GPU has left the registry).
    let mine = |agent: Option<&str>| {
        history
            .registered_agent
            .is_none_or(|now| agent.is_none_or(|then| then == now))
    };
    let proofs: Vec<&RecordSummary> = history
        .records
        .iter()
        .filter(|r| mine(r.agent.as_deref()))
        .collect();
    let memory: Vec<&RecordSummary> = history
        .memory_records
        .iter()
        .filter(|r| mine(r.agent.as_deref()))
        .collect();
    // The window: the last rounds.
    let rounds = rounds_of(
        &proofs,
        &memory,
        history
            .missed_rounds
            .iter()
            .filter(|m| mine(Some(m.agent.as_str()))),
    );
    let rounds = &rounds[rounds.len().saturating_sub(RELIABILITY_WINDOW)..];
    let first_round = rounds.first().map(|(id, _)| *id);
    let window: Vec<&RecordSummary> = proofs
        .iter()
        .copied()
        .filter(|r| first_round.is_some_and(|first| r.id >= first))
        .collect();
    // The model stands where the latest full round put it: a lease's checks between full
    // rounds keep the GPU's rounds going and prove no model.
    let latest = proofs.iter().rev().find(|r| !r.lease_check).copied();
    // The registered model; for a GPU that left the registry, the one it was last proven as.
    let model = history
        .registered_model
        .or(latest.map(|r| r.model.as_str()))
        .map(str::to_string);
    let spec = model.as_deref().and_then(|m| db.by_model(m));
    let mut reasons = Vec::new();
    let mut gpu = match spec.map(|s| spec_figures(s, config, db)) {
        Some(Ok(figures)) => figures,
        _ => GpuFigures {
            label: String::new(),
            model: model.clone(),
            tensor_tflops: None,
            fp32_tflops: None,
            memory_gib: None,
            bandwidth_gbs: None,
            sustained_tflops: None,
            // The validator does not inspect; a model it cannot look up is refused below.
            genuine: true,
            proof: ProofStatus::Missing {
                reason: String::new(),
            },
            source: FigureSource::SpecDatabase,
        },
    };
    gpu.label = history.uuid.to_string();
    gpu.proof = match (history.registered_model, latest) {
        (None, _) => ProofStatus::Missing {
            reason: "it is no longer registered".into(),
        },
        (Some(_), None) => ProofStatus::Missing {
            reason: "no proof record yet".into(),
        },
        (Some(registered), Some(r)) if r.model != registered => ProofStatus::Missing {
            reason: format!(
                "its latest proof was for the {}; it is registered as the {registered} now",
                r.model
            ),
        },
        (Some(_), Some(r)) if r.accepted => ProofStatus::Accepted {
            proves_model: r.proves_model,
        },
        (Some(_), Some(r)) => ProofStatus::Failed {
            reason: r.failure_reason(),
        },
    };
    if spec.is_none() {
        gpu.proof = ProofStatus::Missing {
            reason: format!(
                "model {} is not in the spec database: nothing to count",
                model.as_deref().unwrap_or("(none)")
            ),
        };
    }
    let memory_latest = memory.last().copied();
    // Memory capacity and bandwidth are verified only by the proof of memory: without an
    // accepted, model-proving memory record they count nothing.
    let memory_verified = memory_latest.is_some_and(|m| {
        m.accepted && m.proves_model && Some(m.model.as_str()) == model.as_deref()
    });
    if !memory_verified {
        gpu.memory_gib = gpu.memory_gib.map(|_| 0.0);
        gpu.bandwidth_gbs = gpu.bandwidth_gbs.map(|_| 0.0);
        reasons.push(match memory_latest {
            None => "no proof of memory yet: memory capacity and bandwidth count nothing".into(),
            Some(m) if !m.accepted => format!(
                "its latest proof of memory failed ({}): memory capacity and bandwidth count nothing",
                m.failure_reason()
            ),
            Some(_) => "its latest proof of memory does not speak for its model: memory capacity and bandwidth count nothing".into(),
        });
    }
    // The pace of the full rounds in the window; during a long lease, whose checks fill the
    // window, of the last full round before it.
    let full_in_window = window.iter().any(|r| !r.lease_check);
    let paced: Vec<&RecordSummary> = match full_in_window {
        true => window.clone(),
        false => latest.into_iter().collect(),
    };
    let (pace, gemm_rate) = measured_of(&paced, model.as_deref());
    if let Some(p) = pace {
        for figure in [
            &mut gpu.tensor_tflops,
            &mut gpu.fp32_tflops,
            &mut gpu.sustained_tflops,
        ] {
            *figure = figure.map(|v| v * p);
        }
        gpu.source = FigureSource::ValidatorMeasured;
        if p < 1.0 {
            reasons.push(format!(
                "its proofs ran at {p:.3} of its model's expected pace (median of the window): compute figures scaled by it"
            ));
        }
    }
    // The memory proofs of the window's rounds (those of the GPU's current agent).
    let memory_window: Vec<&RecordSummary> = memory
        .iter()
        .copied()
        .filter(|r| first_round.is_some_and(|first| r.id >= first))
        .collect();
    let (memory_pace, walk_rate) = measured_of(&memory_window, model.as_deref());
    if let (Some(p), true) = (memory_pace, memory_verified) {
        gpu.bandwidth_gbs = gpu.bandwidth_gbs.map(|v| v * p);
        gpu.source = FigureSource::ValidatorMeasured;
        if p < 1.0 {
            reasons.push(format!(
                "its proofs of memory walked at {p:.3} of its model's expected rate (median of the window): bandwidth scaled by it"
            ));
        }
    }
    let measured = MeasuredWork {
        gemm_tflops: gemm_rate.map(|r| r / 1e12),
        compute_pace: pace,
        walk_gbs: walk_rate.map(|r| r / 1e9),
        memory_pace,
    };
    // The proof success rate over the rounds answered: a round not answered is the uptime's.
    let answered: Vec<&&RecordSummary> = window.iter().filter(|r| r.answered()).collect();
    let proofs_total = answered.len() as u64;
    let proofs_passed = answered.iter().filter(|r| r.accepted).count() as u64;
    let round_list: Vec<Round> = rounds.iter().map(|(_, r)| *r).collect();
    let uptime = Uptime::over(&round_list);
    let health: Vec<&HealthEvidence> = history
        .health
        .iter()
        .filter(|h| mine(Some(h.agent.as_str())))
        .filter(|h| first_round.is_some_and(|first| h.id > first))
        .collect();
    let anomalies = anomalies(&health, &config.score.reliability);
    let proves_model = matches!(gpu.proof, ProofStatus::Accepted { proves_model: true });
    let cpu = latest_host_proof(history.cpu_proofs, |a| mine(Some(a)), "CPU");
    let ram = latest_host_proof(history.ram_proofs, |a| mine(Some(a)), "RAM");
    let storage = latest_host_proof(history.storage_proofs, |a| mine(Some(a)), "storage");
    let host = HostFigures {
        gpus: vec![gpu],
        cpu: cpu.as_ref().ok().cloned(),
        ram: ram.as_ref().ok().cloned(),
        storage: storage.as_ref().ok().cloned(),
        reliability: ReliabilityFigures {
            proofs_passed,
            proofs_total,
            uptime: uptime.as_ref().map(|u| u.fraction),
            anomalies: anomalies.as_ref().map(|a| a.count),
            uptime_detail: Some(
                uptime
                    .as_ref()
                    .map_or_else(|| "no round yet".to_string(), Uptime::detail),
            ),
            anomaly_detail: Some(match &anomalies {
                Some(a) if a.count > 0 => a.detail(),
                Some(a) => format!("none in {} health record(s)", a.records),
                None => "no health record in its recent rounds".into(),
            }),
        },
    };
    let mut detail = score(&host, config);
    for (part, proven) in [
        (&mut detail.parts.cpu, cpu.as_ref().err()),
        (&mut detail.parts.ram, ram.as_ref().err()),
        (&mut detail.parts.storage, storage.as_ref().err()),
    ] {
        if let Some(why) = proven {
            part.note = Some(why.clone());
        }
    }
    let is_simulated = history.simulated || latest.is_some_and(|r| r.simulated);
    if is_simulated {
        detail = simulated(detail);
    }
    if let Some(why) = detail.gpus.first().and_then(|g| g.zeroed.clone()) {
        reasons.insert(0, format!("GPU part 0: {why}"));
    }
    if !is_simulated {
        reasons.extend([cpu.err(), ram.err(), storage.err()].into_iter().flatten());
        if detail.reliability.factor < 1.0 {
            reasons.push(format!(
                "reliability {:.3}: {}",
                detail.reliability.factor,
                detail.reliability.notes.join("; ")
            ));
        }
    }
    let gpu_worth = detail
        .gpus
        .first()
        .map_or(0.0, |g| g.score * detail.reliability.factor);
    Assessment {
        gpu_uuid: history.uuid.clone(),
        model,
        simulated: is_simulated,
        score: detail.score,
        gpu_worth,
        latest_record: latest.map(|r| r.id),
        latest_accepted: latest.map(|r| r.accepted),
        proves_model: proves_model && !is_simulated,
        proves_memory: memory_verified && !is_simulated,
        proofs_passed,
        proofs_total,
        uptime,
        anomalies,
        pace,
        measured,
        reasons,
        detail,
    }
}

/// A price for an assessed GPU, or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    /// The price of a GPU-hour of it, with every factor; `None` when it is not priced.
    pub quote: Option<Quote>,
    /// Why there is no price, when there is none.
    pub unpriced: Option<String>,
}

/// Prices a GPU-hour of an assessed GPU in the market `state` of its class. A GPU that counts
/// 0 (not verified, simulated) is not priced, with the reason; nor is a model whose memory
/// type belongs to no price class.
pub fn price(
    assessment: &Assessment,
    state: &MarketState,
    config: &Config,
    db: &SpecDb,
) -> Result<Pricing, QuoteError> {
    let unpriced = |why: String| {
        Ok(Pricing {
            quote: None,
            unpriced: Some(why),
        })
    };
    let Some(gpu) = assessment.detail.gpus.first() else {
        return unpriced("no GPU".into());
    };
    if let Some(why) = &gpu.zeroed {
        return unpriced(format!("not priced: it counts 0 ({why})"));
    }
    let Some(spec) = assessment.model.as_deref().and_then(|m| db.by_model(m)) else {
        return unpriced("not priced: its model is not in the spec database".into());
    };
    let Some(class) = config.class_for_memory(&spec.memory_type) else {
        return unpriced(format!(
            "not priced: no price class lists memory type {:?}",
            spec.memory_type
        ));
    };
    let q = quote(
        gpu,
        &class.name.clone(),
        state,
        assessment.detail.reliability.factor,
        config,
    )?;
    Ok(Pricing {
        quote: Some(q),
        unpriced: None,
    })
}

/// A model's price per GPU-hour from its datasheet figures as the score counts them, with no
/// market and full reliability, dollars: what a class's trades are compared with
/// ([`crate::signals::ClassActivity::base_usd`]). `None` for a model not in the spec database,
/// or of no price class.
pub fn model_base_usd(model: &str, config: &Config, db: &SpecDb) -> Option<f64> {
    let spec = db.by_model(model)?;
    let class = config.class_for_memory(&spec.memory_type)?;
    let figures = spec_figures(spec, config, db).ok()?;
    let potential = crate::score::gpu_score(&figures, &config.score).potential;
    Some(potential * config.score.gpu.reference_tensor_tflops * class.usd_per_tflop_hour)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::SIMULATED;
    use serde_json::json;

    fn db() -> &'static SpecDb {
        SpecDb::embedded()
    }

    const AGENT: &str = "agent-a";

    fn record(id: i64, accepted: bool, ratio: f64) -> RecordSummary {
        RecordSummary {
            id,
            recorded_at_ms: 1_000 * id as u64,
            model: "H200 SXM".into(),
            agent: Some(AGENT.into()),
            simulated: false,
            accepted,
            proves_model: true,
            expected_ms: 1000.0,
            time_ratio: Some(ratio),
            wrong: 0,
            failure: None,
            failure_kind: None,
            measured_rate: None,
            lease_check: false,
        }
    }

    /// A round in which nothing came back in time.
    fn unanswered(id: i64) -> RecordSummary {
        RecordSummary {
            accepted: false,
            time_ratio: None,
            failure: Some("the agent did not answer within 60 s".into()),
            failure_kind: Some(FailureKind::Timeout),
            ..record(id, false, 0.0)
        }
    }

    fn missed(id: i64) -> MissedRound {
        MissedRound {
            id,
            recorded_at_ms: 1_000 * id as u64,
            agent: AGENT.into(),
            reason: "backing off".into(),
            fleet: false,
        }
    }

    #[test]
    fn a_slot_the_fleet_missed_does_not_count_against_the_gpu() {
        let proven: Vec<RecordSummary> = (1..=4).map(|i| record(i, true, 0.95)).collect();
        let memory = [record(100, true, 0.98)];
        let by_fleet: Vec<MissedRound> = (5..=6)
            .map(|i| MissedRound {
                fleet: true,
                ..missed(i)
            })
            .collect();
        let by_agent: Vec<MissedRound> = (5..=6).map(missed).collect();
        let fleet = assess_h200_rounds(&proven, &memory, &by_fleet, &[]);
        let agent = assess_h200_rounds(&proven, &memory, &by_agent, &[]);
        assert_eq!(fleet.uptime.unwrap().fraction, 1.0);
        assert!(agent.uptime.unwrap().fraction < 1.0);
    }

    /// An H200 with these proof records and an accepted proof of memory.
    fn assess_h200(records: &[RecordSummary]) -> Assessment {
        assess_h200_with(records, &[record(100, true, 0.98)])
    }

    fn assess_h200_with(records: &[RecordSummary], memory: &[RecordSummary]) -> Assessment {
        assess_h200_rounds(records, memory, &[], &[])
    }

    /// An H200 registered to [`AGENT`] with these records.
    fn assess_h200_rounds(
        records: &[RecordSummary],
        memory: &[RecordSummary],
        missed: &[MissedRound],
        health: &[HealthEvidence],
    ) -> Assessment {
        assess(
            &GpuHistory {
                uuid: &"GPU-1".parse().unwrap(),
                registered_model: Some("H200 SXM"),
                registered_agent: Some(AGENT),
                simulated: false,
                records,
                memory_records: memory,
                missed_rounds: missed,
                health,
                cpu_proofs: &[],
                ram_proofs: &[],
                storage_proofs: &[],
            },
            &Config::embedded(),
            db(),
        )
    }

    fn priced(a: &Assessment) -> u64 {
        price(a, &balanced(), &Config::embedded(), db())
            .unwrap()
            .quote
            .unwrap()
            .price
            .micro_usd()
    }

    /// A lease's checks keep the GPU's rounds going (uptime, success) but are never its
    /// model's proof or pace: the model stands where the last full round put it, even when
    /// the checks, against their loose bound, ran at a pace no full round would pass at.
    #[test]
    fn a_leases_checks_count_as_rounds_and_never_as_the_models_proof() {
        let check = |id: i64, accepted: bool| RecordSummary {
            proves_model: false,
            lease_check: true,
            ..record(id, accepted, 0.05)
        };
        let mut records: Vec<RecordSummary> = (1..=4).map(|i| record(i, true, 0.95)).collect();
        records.extend((5..=20).map(|i| check(i, true)));
        let leased = assess_h200(&records);
        assert!(leased.proves_model, "{:?}", leased.reasons);
        assert_eq!(leased.latest_record, Some(4));
        assert_eq!(leased.pace, assess_h200(&records[..4]).pace);
        assert_eq!(
            (leased.proofs_passed, leased.proofs_total),
            (20, 20),
            "the checks are rounds"
        );
        // A check that failed counts against the GPU as a failed round does.
        records[19] = check(20, false);
        let failed = assess_h200(&records);
        assert!(failed.proves_model);
        assert_eq!((failed.proofs_passed, failed.proofs_total), (19, 20));
        assert!(failed.score < leased.score);
        // A long lease: its checks fill the window, and the full round before it (which the
        // validator finds behind them) still sets the model's proof and pace.
        let mut long = vec![record(1, true, 1.25)];
        long.extend((2..=41).map(|i| check(i, true)));
        let long = assess_h200(&long);
        assert!(
            long.proves_model && long.proves_memory,
            "{:?}",
            long.reasons
        );
        assert_eq!(long.pace, Some(0.8));
        assert_eq!((long.proofs_passed, long.proofs_total), (20, 20));
    }

    #[test]
    fn rounds_not_answered_lower_the_uptime_and_the_price() {
        // 20 rounds: 16 answered, 2 unanswered, 2 skipped while the validator backed off.
        let mut records: Vec<RecordSummary> = Vec::new();
        let mut skipped = Vec::new();
        for id in 1..=20 {
            match id {
                5 | 9 => records.push(unanswered(id)),
                6 | 10 => skipped.push(missed(id)),
                _ => records.push(record(id, true, 0.95)),
            }
        }
        let a = assess_h200_rounds(&records, &[record(100, true, 0.98)], &skipped, &[]);
        let u = a.uptime.as_ref().unwrap();
        assert_eq!(
            (u.rounds, u.answered, u.unanswered, u.skipped),
            (20, 16, 2, 2)
        );
        // Unanswered rounds are the uptime's, not failed proofs: 16 of 16 passed.
        assert_eq!((a.proofs_passed, a.proofs_total), (16, 16));
        // Uptime 0.8 on the ramp from 0.5: 0.6.
        assert!((a.detail.reliability.uptime - 0.6).abs() < 1e-9);
        assert!((a.detail.reliability.factor - 0.6).abs() < 1e-9);
        let why = a
            .reasons
            .iter()
            .find(|r| r.starts_with("reliability"))
            .unwrap();
        assert!(
            why.contains("uptime 0.800 (proven in 16 of 20 rounds since 1970-01-01T00:00:01Z: 2 unanswered, 2 skipped while backing off): ×0.6"),
            "{why}"
        );
        assert_eq!(priced(&a), (4_448_264.0f64 * 0.6).round() as u64);
        // The same GPU answering every round: reliability 1, the full price.
        let all: Vec<_> = (1..=20).map(|i| record(i, true, 0.95)).collect();
        let full = assess_h200_rounds(&all, &[record(100, true, 0.98)], &[], &[]);
        assert_eq!(full.uptime.as_ref().unwrap().fraction, 1.0);
        assert_eq!(priced(&full), 4_448_264);
        // The window is the last 20 rounds: older missed rounds fall out of it.
        let mut later = records.clone();
        later.extend((21..=40).map(|i| record(i, true, 0.95)));
        let recovered = assess_h200_rounds(&later, &[record(100, true, 0.98)], &skipped, &[]);
        assert_eq!(recovered.uptime.unwrap().fraction, 1.0);
    }

    #[test]
    fn a_gpu_is_judged_over_its_own_rounds_by_its_own_agent() {
        // Registered recently: three rounds, all answered. No round before it counts.
        let three: Vec<_> = (1..=3).map(|i| record(i, true, 0.95)).collect();
        let a = assess_h200_rounds(&three, &[record(100, true, 0.98)], &[], &[]);
        let u = a.uptime.as_ref().unwrap();
        assert_eq!((u.rounds, u.fraction), (3, 1.0));
        // The rounds of the key that held the UUID before count for nothing now.
        let mut squatted: Vec<RecordSummary> = (1..=10)
            .map(|i| RecordSummary {
                agent: Some("squatter".into()),
                ..unanswered(i)
            })
            .collect();
        let squatter_skips: Vec<MissedRound> = (11..=15)
            .map(|i| MissedRound {
                agent: "squatter".into(),
                ..missed(i)
            })
            .collect();
        squatted.extend((16..=18).map(|i| record(i, true, 0.95)));
        let a = assess_h200_rounds(&squatted, &[record(100, true, 0.98)], &squatter_skips, &[]);
        let u = a.uptime.as_ref().unwrap();
        assert_eq!((u.rounds, u.answered), (3, 3));
        assert_eq!((a.proofs_passed, a.proofs_total), (3, 3));
        // Before its first round, uptime is not known, and not counted.
        let none = assess_h200(&[]);
        assert_eq!(none.uptime, None);
        assert!(none
            .detail
            .reliability
            .notes
            .iter()
            .any(|n| n == "uptime not known (no round yet): not counted"));
    }

    /// A health record of the agent's over `[from, to]`, stored as record `id`.
    fn health(
        id: i64,
        alerts: Vec<(u64, &str, &str)>,
        xids: Vec<u32>,
        decay: Option<f64>,
    ) -> HealthEvidence {
        let to_ms = 1_000 * id as u64;
        HealthEvidence {
            id,
            recorded_at_ms: to_ms,
            agent: AGENT.into(),
            simulated: false,
            from_ms: to_ms - 1_000,
            to_ms,
            reported: Some(crate::evidence::ReportedHealth {
                samples: 60,
                alerts_total: alerts.len() as u64,
                alerts: alerts
                    .into_iter()
                    .map(|(t_ms, kind, severity)| crate::evidence::ReportedAlert {
                        t_ms,
                        kind: kind.into(),
                        severity: severity.into(),
                    })
                    .collect(),
                xid_total: xids.len() as u64,
                xids,
            }),
            failure: None,
            decay,
        }
    }

    #[test]
    fn anomalies_in_the_windows_health_records_lower_the_price() {
        // Rounds at ids 10, 20, …, 200; health records beside them.
        let records: Vec<_> = (1..=20).map(|i| record(10 * i, true, 0.95)).collect();
        let memory = [record(1_000, true, 0.98)];
        let clean: Vec<_> = (1..=20)
            .map(|i| health(10 * i + 1, vec![], vec![], None))
            .collect();
        let a = assess_h200_rounds(&records, &memory, &[], &clean);
        assert_eq!(a.anomalies.as_ref().unwrap().count, 0);
        assert_eq!(priced(&a), 4_448_264);
        // An XID 79 and a thermal alert in one window: two anomalies, ×0.81.
        let mut sick = clean.clone();
        sick[7] = health(
            81,
            vec![(80_500, "thermal_runaway", "critical")],
            vec![79],
            None,
        );
        let a = assess_h200_rounds(&records, &memory, &[], &sick);
        assert_eq!(a.anomalies.as_ref().unwrap().count, 2);
        assert!((a.detail.reliability.anomalies - 0.81).abs() < 1e-9);
        let why = a
            .reasons
            .iter()
            .find(|r| r.starts_with("reliability"))
            .unwrap();
        assert!(why.contains("2 anomalies (thermal_runaway alert (critical) at 1970-01-01T00:01:20Z; xid 79 in the window ending 1970-01-01T00:01:21Z): ×0.81"), "{why}");
        assert_eq!(priced(&a), (4_448_264.0f64 * 0.81).round() as u64);
        // The validator's own measurement of a slow-down counts twice, and once more beside
        // the agent's quiet report.
        let mut slow = clean.clone();
        slow[3] = health(41, vec![], vec![], Some(0.25));
        let a = assess_h200_rounds(&records, &memory, &[], &slow);
        assert_eq!(a.anomalies.as_ref().unwrap().count, 3);
        // Health recorded before the window's first round is not the window's.
        let mut old = clean.clone();
        old.push(health(
            5,
            vec![(4_500, "throttling", "warning")],
            vec![48],
            None,
        ));
        let a = assess_h200_rounds(&records, &memory, &[], &old);
        assert_eq!(a.anomalies.as_ref().unwrap().count, 0);
        // An agent that refuses every health request: unknown, not clean (one anomaly).
        let refused: Vec<_> = clean
            .iter()
            .map(|h| HealthEvidence {
                reported: None,
                failure: Some("the agent answered HTTP 404".into()),
                ..h.clone()
            })
            .collect();
        let a = assess_h200_rounds(&records, &memory, &[], &refused);
        assert_eq!(a.anomalies.as_ref().unwrap().count, 1);
        assert_eq!(priced(&a), (4_448_264.0f64 * 0.9).round() as u64);
        // No health record at all: not known, not counted.
        let a = assess_h200_rounds(&records, &memory, &[], &[]);
        assert_eq!(a.anomalies, None);
        assert!(a
            .detail
            .reliability
            .notes
            .iter()
            .any(|n| n.contains("no health record")));
    }

    /// A cheater answering wrongly in 4 of every 5 rounds: each wrong answer counts against
    /// its proofs and its uptime, and its latest wrong answer zeroes its GPU part.
    #[test]
    fn wrong_answers_count_against_the_proofs_and_the_uptime() {
        let records: Vec<RecordSummary> = (1..=20)
            .map(|id| RecordSummary {
                wrong: if id % 5 == 0 { 0 } else { 1024 },
                ..record(id, id % 5 == 0, 0.95)
            })
            .collect();
        let a = assess_h200(&records);
        assert_eq!((a.proofs_passed, a.proofs_total), (4, 20));
        let u = a.uptime.as_ref().unwrap();
        assert_eq!((u.rounds, u.proven, u.failed, u.answered), (20, 4, 16, 20));
        assert_eq!(u.fraction, 0.2);
        // Its proofs (0.2) and uptime (0.2) both fall below their floors: reliability 0.
        assert_eq!(a.detail.reliability.factor, 0.0);
        assert_eq!(a.gpu_worth, 0.0);
        // Honest in its latest round: still worth nothing.
        assert_eq!(a.latest_accepted, Some(true));
        // A round whose GEMM proof passed but whose memory proof failed is not proven.
        let honest: Vec<_> = (1..=20).map(|i| record(i * 2, true, 0.95)).collect();
        let mut memory: Vec<_> = (1..=20).map(|i| record(i * 2 + 1, true, 0.98)).collect();
        memory[4].accepted = false;
        let a = assess_h200_with(&honest, &memory);
        let u = a.uptime.as_ref().unwrap();
        assert_eq!((u.proven, u.failed), (19, 1));
    }

    #[test]
    fn memory_counts_only_with_an_accepted_proof_of_memory() {
        let records: Vec<_> = (1..=20).map(|i| record(i, true, 0.95)).collect();
        let proven = assess_h200(&records);
        let mut failed = record(100, false, 1.19);
        failed.failure = None;
        for (memory, why) in [
            (vec![], "no proof of memory yet"),
            (
                vec![failed],
                "latest proof of memory failed (rejected at 1.19",
            ),
        ] {
            let a = assess_h200_with(&records, &memory);
            assert!(a.score < proven.score, "{} vs {}", a.score, proven.score);
            assert!(a.score > 0.0, "compute still counts");
            assert_eq!(a.detail.gpus[0].memory, 0.0);
            assert!(a.reasons.iter().any(|r| r.contains(why)), "{:?}", a.reasons);
        }
    }

    fn balanced() -> MarketState {
        MarketState::balanced(&Config::embedded())
    }

    #[test]
    fn records_are_read_from_the_validators_records() {
        let agent = "ab".repeat(32);
        let body = json!({
            "version": 3, "challenge_id": "c", "gpu_uuid": "GPU-1", "agent": agent,
            "model": "H200 SXM", "simulated": false, "proves_model": true, "lead": 1.2,
            "policy": pog_records::Policy::per_model_default(),
            "challenge": {"version": 1, "nonce": "00".repeat(32), "gpu_uuid": "GPU-1",
                "gpu_bus_id": "x", "agent_key": agent, "validator_key": agent,
                "precision": "int8", "size": 32, "batch": 1, "leaf_elements": 64},
            "expected_ms": 1234.5, "accepted": false,
            "outcome": {"challenge_id": "c", "gpu_uuid": "GPU-1", "root": "", "checked": 4,
                "rejected_total": 3, "rejected": [], "accepted": false,
                "time": {"measured_ms": 1.0, "round_trip_ms": 0.0, "expected_ms": 1.0,
                         "ratio": 1.31, "accepted": false}},
            "failure": null, "spot_check_secret": "", "bytes_to_agent": 0,
            "bytes_from_agent": 0, "recorded_at_ms": 99
        });
        let record = |body: &serde_json::Value| -> pog_records::Record {
            serde_json::from_value(body.clone()).unwrap()
        };
        let r = RecordSummary::of(7, &record(&body));
        assert_eq!((r.id, r.recorded_at_ms, r.wrong), (7, 99, 3));
        assert_eq!(r.time_ratio, Some(1.31));
        assert!(r.proves_model);
        assert_eq!(r.failure_reason(), "rejected (3 spot check(s) wrong)");
        let mut failed = body.clone();
        failed["outcome"] = serde_json::Value::Null;
        failed["failure"] =
            json!({"kind": "timeout", "message": "the agent did not answer within 60 s"});
        let r = RecordSummary::of(8, &record(&failed));
        assert_eq!(r.failure_reason(), "the agent did not answer within 60 s");
        assert_eq!(r.failure_kind, Some(FailureKind::Timeout));
        assert!(!r.answered());
        let mut refused = failed.clone();
        refused["failure"] =
            json!({"kind": "agent_refused", "message": "the agent answered HTTP 500"});
        let r = RecordSummary::of(9, &record(&refused));
        assert!(r.answered(), "an HTTP error is an answer, a wrong one");
        assert_eq!(r.agent.as_deref(), Some(agent.as_str()));
    }

    #[test]
    fn an_accepted_model_proving_record_scores_and_prices_the_gpu() {
        let records: Vec<_> = (1..=20).map(|i| record(i, true, 0.95)).collect();
        let a = assess_h200(&records);
        assert_eq!(a.detail.gpus[0].zeroed, None);
        // The reference GPU, fully reliable: its GPU part alone, 0.55.
        assert!((a.score - 0.55).abs() < 1e-9, "{}", a.score);
        assert!((a.gpu_worth - 1.0).abs() < 1e-9);
        assert_eq!(a.pace, Some(1.0), "faster than expected counts no more");
        assert_eq!(a.latest_record, Some(20));
        assert!(a
            .reasons
            .iter()
            .any(|r| r == "RAM: no proof of it by the validator yet"));
        let p = price(&a, &balanced(), &Config::embedded(), db()).unwrap();
        // As `pog price --model "H200 SXM"`: 829.9 TFLOP/s × $0.00536.
        assert_eq!(p.quote.unwrap().price.micro_usd(), 4_448_264);
    }

    /// An accepted H200 with its host's latest proofs of CPU, RAM and storage.
    fn assess_host(
        cpu: &[HostProof<CpuFigures>],
        ram: &[HostProof<RamFigures>],
        storage: &[HostProof<StorageFigures>],
    ) -> Assessment {
        let records: Vec<_> = (1..=20).map(|i| record(i, true, 0.95)).collect();
        assess(
            &GpuHistory {
                uuid: &"GPU-1".parse().unwrap(),
                registered_model: Some("H200 SXM"),
                registered_agent: Some(AGENT),
                simulated: false,
                records: &records,
                memory_records: &[record(100, true, 0.98)],
                missed_rounds: &[],
                health: &[],
                cpu_proofs: cpu,
                ram_proofs: ram,
                storage_proofs: storage,
            },
            &Config::embedded(),
            db(),
        )
    }

    /// A host proof by [`AGENT`] of `figures`, counting or failed.
    fn host_proof<F>(id: i64, figures: F, counts: bool) -> HostProof<F> {
        HostProof {
            id,
            agent: AGENT.into(),
            counts,
            figures: Some(figures),
            failure: (!counts).then(|| "rejected at 2.10 of its time bound".into()),
        }
    }

    #[test]
    fn the_hosts_proven_cpu_and_storage_lift_an_honest_host_above_the_gpu_alone() {
        let c = Config::embedded().score;
        let cpu = CpuFigures::Proven {
            lanes: 16,
            steps_per_s: c.cpu.reference_steps_per_s,
        };
        let storage = StorageFigures::Proven {
            reads_per_s: c.storage.reference_reads_per_s,
            capacity_gb: c.storage.reference_gb,
        };
        let ram = RamFigures::Proven {
            walk_gbs: c.ram.reference_walk_gbs,
            capacity_gib: c.ram.reference_gib,
        };
        let gpu_alone = assess_host(&[], &[], &[]);
        assert!((gpu_alone.score - 0.55).abs() < 1e-9, "{}", gpu_alone.score);
        assert!(gpu_alone
            .reasons
            .iter()
            .any(|r| r == "CPU: no proof of it by the validator yet"));
        let proven = assess_host(
            &[host_proof(21, cpu.clone(), true)],
            &[],
            &[host_proof(22, storage.clone(), true)],
        );
        // The reference host's CPU and storage, proven: 0.55 + 0.20 + 0.10; its RAM counts
        // nothing until the validator proves it.
        assert!((proven.score - 0.85).abs() < 1e-9, "{}", proven.score);
        assert!(proven
            .reasons
            .iter()
            .any(|r| r == "RAM: no proof of it by the validator yet"));
        let whole = assess_host(
            &[host_proof(21, cpu.clone(), true)],
            &[host_proof(23, ram.clone(), true)],
            &[host_proof(22, storage.clone(), true)],
        );
        // And proven in every part: 0.55 + 0.20 + 0.15 + 0.10.
        assert!((whole.score - 1.0).abs() < 1e-9, "{}", whole.score);
        assert!((whole.detail.parts.ram.value - 1.0).abs() < 1e-9);
        assert_eq!(whole.detail.parts.ram.note, None);
        // A failed latest proof of RAM counts 0 with its reason.
        let late = assess_host(
            &[host_proof(21, cpu.clone(), true)],
            &[
                host_proof(23, ram, true),
                host_proof(
                    24,
                    RamFigures::Proven {
                        walk_gbs: 1.0,
                        capacity_gib: 1.0,
                    },
                    false,
                ),
            ],
            &[host_proof(22, storage.clone(), true)],
        );
        assert!((late.score - 0.85).abs() < 1e-9, "{}", late.score);
        assert_eq!(
            late.detail.parts.ram.note.as_deref(),
            Some("RAM: its latest proof failed (rejected at 2.10 of its time bound)")
        );
        assert!((proven.detail.parts.cpu.value - 1.0).abs() < 1e-9);
        assert!((proven.detail.parts.storage.value - 1.0).abs() < 1e-9);
        assert_eq!(proven.detail.parts.cpu.note, None);
        assert!(proven.reasons.iter().all(|r| !r.starts_with("CPU")));
        // The price is the GPU's: the host parts do not move it.
        assert_eq!(priced(&proven), priced(&gpu_alone));
        // A latest proof that failed counts 0 with its reason, whatever came before; an
        // earlier agent's proofs count nothing for the current one.
        let failed = assess_host(
            &[
                host_proof(21, cpu.clone(), true),
                host_proof(23, cpu, false),
            ],
            &[],
            &[HostProof {
                agent: "another-agent".into(),
                ..host_proof(22, storage, true)
            }],
        );
        assert!((failed.score - 0.55).abs() < 1e-9, "{}", failed.score);
        assert!(
            failed
                .reasons
                .iter()
                .any(|r| r == "CPU: its latest proof failed (rejected at 2.10 of its time bound)"),
            "{:?}",
            failed.reasons
        );
        assert!(failed
            .reasons
            .iter()
            .any(|r| r == "storage: no proof of it by the validator yet"));
    }

    #[test]
    fn host_proofs_are_read_from_the_validators_records() {
        let agent = "ab".repeat(32);
        let time = |ms: f64, ratio: f64| {
            json!({"measured_ms": ms, "round_trip_ms": 0.0,
            "expected_ms": 100.0, "ratio": ratio, "accepted": ratio <= 1.1})
        };
        let storage = json!({
            "version": 3, "record_id": "storage-1", "gpu_uuid": "GPU-1", "agent": agent,
            "model": "H200 SXM", "simulated": false, "proves_storage": true,
            "claim": {"bytes": 1u64 << 30, "class": "nvme"},
            "policy": pog_records::StoragePolicy::default(),
            "dataset": {"version": 1, "nonce": "00".repeat(32), "gpu_uuid": "GPU-1",
                "gpu_bus_id": "x", "agent_key": agent, "validator_key": agent,
                "shape": {"items": 4096, "chunks_per_item": 64, "passes": 3, "double_rounds": 8}},
            "root": "00", "dataset_since_ms": 5, "audit": null,
            "round": {"round_id": "1", "root": "00", "steps": 1024, "opened": 64,
                "regenerated": 2, "rejection": null, "time": time(51.2, 0.2), "accepted": true},
            "expected_ms": 256.0, "accepted": true, "failure": null, "spot_check_secret": "",
            "bytes_to_agent": 1, "bytes_from_agent": 2, "recorded_at_ms": 9
        });
        let read: pog_records::StorageRecord = serde_json::from_value(storage.clone()).unwrap();
        let proof = HostProof::of_storage(3, &read);
        assert!(proof.counts && proof.failure.is_none(), "{proof:?}");
        assert_eq!(
            proof.figures,
            Some(StorageFigures::Proven {
                reads_per_s: 20_000.0,
                capacity_gb: (1u64 << 30) as f64 / 1e9,
            })
        );
        let mut late = storage;
        late["accepted"] = json!(false);
        late["round"]["accepted"] = json!(false);
        late["round"]["time"] = time(300.0, 1.17);
        let read: pog_records::StorageRecord = serde_json::from_value(late).unwrap();
        let proof = HostProof::of_storage(4, &read);
        assert!(!proof.counts);
        assert_eq!(
            proof.failure.as_deref(),
            Some("rejected at 1.17 of its time bound")
        );
    }

    #[test]
    fn a_failed_latest_record_zeroes_the_gpu_and_unprices_it() {
        let mut records: Vec<_> = (1..=19).map(|i| record(i, true, 0.95)).collect();
        records.push(record(20, false, 1.31));
        let a = assess_h200(&records);
        assert_eq!(a.score, 0.0);
        assert_eq!(
            a.reasons[0],
            "GPU part 0: its latest proof failed: rejected at 1.31 of its time bound"
        );
        let p = price(&a, &balanced(), &Config::embedded(), db()).unwrap();
        assert!(p.quote.is_none());
        assert!(p.unpriced.unwrap().contains("rejected at 1.31"));
        // The next accepted record brings it back, at 20 of 21 in the window... of 20: 19/20.
        records.push(record(21, true, 0.95));
        let a = assess_h200(&records);
        assert_eq!((a.proofs_passed, a.proofs_total), (19, 20));
        // The failed round counts against the proofs (×0.9) and the uptime (×0.9) alike.
        assert!((a.detail.reliability.factor - 0.81).abs() < 1e-9);
        let q = price(&a, &balanced(), &Config::embedded(), db())
            .unwrap()
            .quote
            .unwrap();
        assert_eq!(q.price.micro_usd(), (4_448_264.0f64 * 0.81).round() as u64);
    }

    #[test]
    fn a_slow_pace_scales_the_compute_figures() {
        let records: Vec<_> = (1..=5).map(|i| record(i, true, 1.08)).collect();
        let a = assess_h200(&records);
        let pace = a.pace.unwrap();
        assert!((pace - 1.0 / 1.08).abs() < 1e-12);
        let g = &a.detail.gpus[0];
        assert!((g.tensor - pace).abs() < 1e-9 && (g.memory - 1.0).abs() < 1e-9);
        assert!(a.reasons.iter().any(|r| r.contains("expected pace")));
    }

    #[test]
    fn the_memory_walk_the_validator_timed_scales_the_bandwidth_and_is_labelled_measured() {
        // GEMM proofs at their model's pace, doing 1e12 FLOPs in 1 s; memory walks of 4e11
        // bytes in 1.25 × the expected 100 ms: 3,200 GB/s, a pace of 0.8.
        let records: Vec<_> = (1..=5)
            .map(|i| RecordSummary {
                measured_rate: Some(1e12),
                ..record(i, true, 1.0)
            })
            .collect();
        let walks: Vec<_> = (6..=8)
            .map(|i| RecordSummary {
                measured_rate: Some(3.2e12),
                ..record(i, true, 1.25)
            })
            .collect();
        let fast = assess_h200_with(&records, &[record(6, true, 1.0)]);
        let slow = assess_h200_with(&records, &walks);
        assert_eq!(slow.measured.memory_pace, Some(0.8));
        assert_eq!(slow.measured.walk_gbs, Some(3200.0));
        assert_eq!(slow.measured.gemm_tflops, Some(1.0));
        assert_eq!(slow.measured.compute_pace, Some(1.0));
        let (f, s) = (&fast.detail.gpus[0], &slow.detail.gpus[0]);
        assert_eq!(s.source, FigureSource::ValidatorMeasured);
        assert!(
            (s.bandwidth - 0.8 * f.bandwidth).abs() < 1e-9,
            "{s:?} {f:?}"
        );
        assert_eq!((s.tensor, s.memory), (f.tensor, f.memory));
        assert!(slow.reasons.iter().any(|r| r.contains("walked at 0.800")));
        // The slower walk is priced lower.
        let quote = |a: &Assessment| {
            price(a, &balanced(), &Config::embedded(), db())
                .unwrap()
                .quote
                .unwrap()
                .price
        };
        assert!(quote(&slow) < quote(&fast));
        // A memory proof that failed counts no bandwidth at all, paced or not.
        let failed = assess_h200_with(&records, &[record(9, false, 1.25)]);
        assert_eq!(failed.detail.gpus[0].bandwidth, 0.0);
    }

    #[test]
    fn no_record_a_test_plan_another_model_or_no_registration_count_nothing() {
        let config = Config::embedded();
        let none = assess_h200(&[]);
        assert_eq!(none.score, 0.0);
        assert!(none.reasons[0].contains("no proof record yet"));
        let mut test_plan = record(1, true, 0.5);
        test_plan.proves_model = false;
        let a = assess_h200(&[test_plan]);
        assert_eq!(a.score, 0.0);
        assert!(a.reasons[0].contains("does not prove the model"));
        let mut other = record(1, true, 0.9);
        other.model = "H100 SXM".into();
        assert!(assess_h200(&[other]).reasons[0].contains("registered as the H200 SXM now"));
        let gone = assess(
            &GpuHistory {
                uuid: &"GPU-1".parse().unwrap(),
                registered_model: None,
                registered_agent: None,
                simulated: false,
                records: &[record(1, true, 0.9)],
                memory_records: &[],
                missed_rounds: &[],
                health: &[],
                cpu_proofs: &[],
                ram_proofs: &[],
                storage_proofs: &[],
            },
            &config,
            db(),
        );
        assert!(gone.reasons[0].contains("no longer registered"));
        for a in [none, gone] {
            assert!(price(&a, &balanced(), &config, db())
                .unwrap()
                .quote
                .is_none());
        }
    }

    #[test]
    fn a_simulated_gpu_scores_zero_everywhere_with_the_reason() {
        let mut records: Vec<_> = (1..=3).map(|i| record(i, true, 0.9)).collect();
        for r in &mut records {
            r.simulated = true;
        }
        let a = assess_h200(&records);
        assert!(a.simulated);
        assert_eq!((a.score, a.gpu_worth), (0.0, 0.0));
        assert!(a.reasons[0].contains(SIMULATED));
        let g = &a.detail.gpus[0];
        assert_eq!((g.tensor, g.potential, g.score), (0.0, 0.0, 0.0));
        for p in [&a.detail.parts.gpu, &a.detail.parts.cpu] {
            assert_eq!((p.value, p.weighted), (0.0, 0.0));
            assert_eq!(p.note.as_deref(), Some(SIMULATED));
        }
        let p = price(&a, &balanced(), &Config::embedded(), db()).unwrap();
        assert!(p.quote.is_none() && p.unpriced.unwrap().contains(SIMULATED));
    }

    #[test]
    fn only_the_window_counts_for_reliability() {
        let mut records: Vec<_> = (1..=10).map(|i| record(i, false, 1.5)).collect();
        records.extend((11..=30).map(|i| record(i, true, 0.95)));
        let a = assess_h200(&records);
        assert_eq!((a.proofs_passed, a.proofs_total), (20, 20));
        assert!((a.detail.reliability.factor - 1.0).abs() < 1e-12);
    }
}
