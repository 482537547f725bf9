//! The validator's health records: after each round's proofs it asks the agent for a signed
//! summary of the GPU's telemetry since its last health record (`POST /v1/health`), and
//! stores, signed with its own key, a "health-record" beside the proof records. The record
//! keeps the two kinds of figure apart:
//!
//! - **reported** — the agent's summary (min/mean/max per signal, alerts, XIDs, samples): its
//!   signature is checked here, but a modified agent can sign anything, so it only ever counts
//!   against its own GPU (its warning and critical alerts and its XIDs are anomalies in the
//!   score, `pog_market::evidence`), never for it;
//! - **measured** — this validator's own proof timings in the same window against the GPU's
//!   earlier proofs: the trusted performance-decay signal (an anomaly counted double).
//!
//! A contradiction between the two (a "healthy" report while the validator's proofs slow
//! down) is written into the record: that is itself a signal (one anomaly more).

use crate::registry_model::RegisteredGpu;
use crate::validator::{ExchangeError, Validator, ValidatorError};
use pog_proof::wire::{kind, HealthRequest, HealthSummary, MAX_HEALTH_WINDOW_MS};
use pog_records::{HealthRecord, ProofPace};
use pog_signed::{Envelope, PublicKey, RecordKind};
use serde::Deserialize;
use std::time::Duration;

/// The window of a GPU's first health record (later ones start where the last one ended, up
/// to [`MAX_HEALTH_WINDOW_MS`] back).
pub const FIRST_WINDOW_MS: u64 = 300_000;

/// Earlier proofs the measured pace is compared with.
pub const BASELINE_PROOFS: usize = 20;

/// The measured slow-down past which a report without any warning is called a contradiction.
pub const DECAY_CONTRADICTION: f64 = 0.10;

/// How long the agent has to answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest summary accepted (one is a few kilobytes).
const MAX_SUMMARY_BYTES: usize = 256 << 10;

/// Records read back to find the last health record, the window's proofs and the baseline
/// (each round stores up to three records: proof, memory, health).
const RECORDS_READ: usize = 3 * (BASELINE_PROOFS + 40);

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// What the pace reads of a proof record of either kind (the rest is ignored).
#[derive(Deserialize)]
struct Timed {
    recorded_at_ms: u64,
    outcome: Option<TimedOutcome>,
}

#[derive(Deserialize)]
struct TimedOutcome {
    time: TimedRatio,
}

#[derive(Deserialize)]
struct TimedRatio {
    ratio: f64,
}

/// A stored envelope's kind and body, when it is one.
fn opened(json: &str) -> Option<(String, String)> {
    let envelope: Envelope = serde_json::from_str(json).ok()?;
    Some((envelope.kind, envelope.body))
}

/// The pace over `[from_ms, to_ms]` from a GPU's stored records (oldest first).
pub fn proof_pace(records: &[(i64, String)], from_ms: u64, to_ms: u64) -> ProofPace {
    let (mut ratios, mut memory_ratios, mut before) = (Vec::new(), Vec::new(), Vec::new());
    for (_, json) in records {
        let Some((kind, body)) = opened(json) else {
            continue;
        };
        let memory = match RecordKind::from_wire_kind(&kind) {
            Some(RecordKind::ProofRound) => false,
            Some(RecordKind::MemoryRound) => true,
            _ => continue,
        };
        let timed = serde_json::from_str::<Timed>(&body)
            .ok()
            .and_then(|r| Some((r.recorded_at_ms, r.outcome?.time.ratio, memory)));
        match timed {
            Some((at, ratio, false)) if at < from_ms => before.push(ratio),
            Some((at, ratio, false)) if at <= to_ms => ratios.push(ratio),
            Some((at, ratio, true)) if (from_ms..=to_ms).contains(&at) => memory_ratios.push(ratio),
            _ => {}
        }
    }
    before.drain(..before.len().saturating_sub(BASELINE_PROOFS));
    let median_ratio = median(&ratios);
    let baseline_ratio = median(&before);
    let decay = match (median_ratio, baseline_ratio) {
        (Some(now), Some(then)) if then > 0.0 => Some(now / then - 1.0),
        _ => None,
    };
    ProofPace {
        ratios,
        memory_ratios,
        median_ratio,
        baseline_ratio,
        decay,
    }
}

/// Where the agent's report and the validator's measurement disagree.
pub fn contradictions(
    reported: Option<&HealthSummary>,
    measured: &ProofPace,
    simulated: bool,
) -> Vec<String> {
    let mut found = Vec::new();
    let Some(report) = reported else {
        return found;
    };
    let warned = report
        .alerts
        .iter()
        .any(|a| a.severity == "warning" || a.severity == "critical")
        || report.xid_total > 0;
    if let Some(decay) = measured.decay.filter(|d| *d > DECAY_CONTRADICTION) {
        if !warned {
            found.push(format!(
                "the validator's proofs ran {:.0} % slower than this GPU's earlier ones while \
                 the agent reports no warning",
                decay * 1e2
            ));
        }
    }
    if report.samples == 0 && !simulated && !measured.ratios.is_empty() {
        found.push(
            "the agent reports no telemetry in a window where the GPU answered proofs".into(),
        );
    }
    found
}

impl Validator {
    /// Asks the agent of a registered GPU for its health since the last health record (the
    /// first one: the last [`FIRST_WINDOW_MS`]; never more than [`MAX_HEALTH_WINDOW_MS`]),
    /// measures the proof pace of the same window from this validator's own records, and
    /// stores both as a signed [`HealthRecord`]. An agent that does not answer well gets a
    /// record with its failure and the measurement.
    pub async fn collect_health(&self, uuid: &str) -> Result<HealthRecord, ValidatorError> {
        let gpu = self
            .records()
            .unblocked(|| self.registry().gpu(uuid))
            .await?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        self.collect_health_of(&gpu).await
    }

    /// [`Validator::collect_health`] of the GPU of registry row `gpu`, read beforehand.
    pub async fn collect_health_of(
        &self,
        gpu: &RegisteredGpu,
    ) -> Result<HealthRecord, ValidatorError> {
        let uuid = gpu.uuid.as_str();
        let records = self
            .records()
            .unblocked(|| self.registry().latest_records(uuid, RECORDS_READ))
            .await?;
        let to_ms = self.records().now_ms();
        let last_end = records.iter().rev().find_map(|(_, json)| {
            let (kind, body) = opened(json)?;
            (kind == RecordKind::HealthRound.wire_kind())
                .then(|| serde_json::from_str::<HealthRecord>(&body).ok())
                .flatten()
                .map(|r| r.to_ms)
        });
        let from_ms = last_end
            .filter(|&end| end < to_ms)
            .unwrap_or(to_ms.saturating_sub(FIRST_WINDOW_MS))
            .max(to_ms.saturating_sub(MAX_HEALTH_WINDOW_MS));
        let request = HealthRequest {
            id: hex::encode(pog_signed::random_bytes::<16>()),
            gpu_uuid: gpu.uuid.clone(),
            agent_key: gpu.agent.clone(),
            from_ms,
            to_ms,
            issued_at_ms: to_ms,
        };
        let exchange = async {
            let envelope = self.records().seal(kind::HEALTH_REQUEST, &request)?;
            let (_, answer) = pog_net::http::post_counted(
                self.client(),
                &format!("{}/v1/health", gpu.endpoint),
                &envelope,
                HEALTH_TIMEOUT,
                MAX_SUMMARY_BYTES,
            )
            .await?;
            let (summary, signer): (HealthSummary, PublicKey) =
                pog_signed::decode(&answer, kind::HEALTH_SUMMARY)?;
            if signer != gpu.agent {
                return Err(ExchangeError::Protocol(
                    pog_proof::session::ProtocolError::WrongSigner {
                        expected: gpu.agent.clone(),
                        got: signer,
                    },
                ));
            }
            summary.check(&request).map_err(|_| {
                ExchangeError::Protocol(pog_proof::session::ProtocolError::OutOfOrder(
                    "a health summary that does not answer the request (or is malformed)",
                ))
            })?;
            Ok::<_, ExchangeError>(summary)
        };
        let answered = exchange.await;
        let measured = proof_pace(&records, from_ms, to_ms);
        let reported = answered.as_ref().ok().cloned();
        let record = HealthRecord {
            version: pog_records::RECORD_VERSION,
            record_id: format!("health-{}", request.id),
            gpu_uuid: gpu.uuid.clone(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            from_ms,
            to_ms,
            contradictions: contradictions(reported.as_ref(), &measured, gpu.simulated),
            reported,
            failure: answered.as_ref().err().map(ExchangeError::failure),
            measured,
            recorded_at_ms: self.records().now_ms(),
        };
        let healthy = record.failure.is_none() && record.contradictions.is_empty();
        self.records()
            .unblocked(|| self.store((&record.record_id, None), healthy, &record))
            .await?;
        Ok(record)
    }
}

/// The round's health record (`crate::schedule`), logged: a failure to ask is a warning, never
/// a failed round.
pub async fn collect_logged(validator: &Validator, gpu: &RegisteredGpu) {
    let uuid = gpu.uuid.as_str();
    match validator.collect_health_of(gpu).await {
        Ok(h) => tracing::info!(
            gpu = uuid,
            samples = h.reported.as_ref().map(|r| r.samples),
            alerts = h.reported.as_ref().map(|r| r.alerts_total),
            xids = h.reported.as_ref().map(|r| r.xid_total),
            proof_decay = h.measured.decay.map(pog_net::rounding::for_log),
            contradictions = h.contradictions.len(),
            failure = h.failure.as_ref().map(|f| f.message.as_str()),
            "health recorded"
        ),
        Err(e) => tracing::warn!(gpu = uuid, error = %e, "health not recorded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_proof::wire::HealthAlert;
    use pog_signed::Identity;

    fn stored(kind: &str, body: serde_json::Value) -> (i64, String) {
        let envelope = Identity::from_seed([3; 32]).seal(kind, &body).unwrap();
        (0, serde_json::to_string(&envelope).unwrap())
    }

    /// A proof record with what the pace reads (the loopback test reads real ones).
    fn proof(kind: &str, at_ms: u64, ratio: f64) -> (i64, String) {
        let value = serde_json::json!({
            "accepted": true,
            "recorded_at_ms": at_ms,
            "outcome": {"time": {"ratio": ratio}},
        });
        stored(kind, value)
    }

    #[test]
    fn the_pace_compares_the_window_with_earlier_proofs() {
        let mut records: Vec<(i64, String)> = (0..5)
            .map(|i| proof(RecordKind::ProofRound.wire_kind(), 1_000 + i, 0.5))
            .collect();
        records.push(proof(RecordKind::ProofRound.wire_kind(), 10_000, 0.6));
        records.push(proof(RecordKind::MemoryRound.wire_kind(), 10_500, 0.9));
        records.push(proof(RecordKind::ProofRound.wire_kind(), 11_000, 0.7));
        records.push(stored("registration", serde_json::json!({"x": 1})));
        records.push(stored(
            RecordKind::ProofRound.wire_kind(),
            serde_json::json!({"recorded_at_ms": 12_000, "outcome": null}),
        ));
        records.push(proof(RecordKind::ProofRound.wire_kind(), 99_000, 9.0)); // after the window
        let pace = proof_pace(&records, 5_000, 20_000);
        assert_eq!(pace.ratios, vec![0.6, 0.7]);
        assert_eq!(pace.baseline_ratio, Some(0.5));
        assert!((pace.median_ratio.unwrap() - 0.65).abs() < 1e-12);
        assert!((pace.decay.unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(pace.memory_ratios, vec![0.9]);
        let empty = proof_pace(&records[..5], 5_000, 20_000);
        assert_eq!((empty.median_ratio, empty.decay), (None, None));
    }

    fn report(alerts: Vec<HealthAlert>, samples: u64) -> HealthSummary {
        HealthSummary {
            request_id: "r".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            from_ms: 0,
            to_ms: 1,
            simulated: false,
            samples,
            signals: Default::default(),
            alerts,
            alerts_total: 0,
            xids: vec![],
            xid_total: 0,
        }
    }

    #[test]
    fn a_quiet_report_beside_slower_proofs_is_a_contradiction() {
        let slower = ProofPace {
            ratios: vec![0.7],
            memory_ratios: vec![],
            median_ratio: Some(0.7),
            baseline_ratio: Some(0.5),
            decay: Some(0.4),
        };
        let quiet = report(vec![], 60);
        let found = contradictions(Some(&quiet), &slower, false);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("40 % slower"), "{found:?}");
        let warned = report(
            vec![HealthAlert {
                t_ms: 0,
                kind: "throttling".into(),
                severity: "warning".into(),
            }],
            60,
        );
        assert!(contradictions(Some(&warned), &slower, false).is_empty());
        let steady = ProofPace {
            decay: Some(0.02),
            ..slower.clone()
        };
        assert!(contradictions(Some(&quiet), &steady, false).is_empty());
        let silent = report(vec![], 0);
        assert_eq!(contradictions(Some(&silent), &steady, false).len(), 1);
        assert!(contradictions(Some(&silent), &steady, true).is_empty());
        assert!(contradictions(None, &slower, false).is_empty());
    }
}
