//! The overview of every GPU this validator serves: each registered GPU with its latest
//! health record — what its agent reported (self-reported: a modified agent can sign
//! anything) beside this validator's own pace of its proofs (measured) — as JSON at
//! `GET /v1/overview?after=UUID&limit=N` and as a page at `GET /overview` that asks for it
//! again every 10 s and redraws in place (the monitor's dashboard is per host; this is the
//! fleet of agents on one page).

use crate::validator::Validator;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use pog_net::http::ApiError;
use pog_proof::wire::SignalSummary;
use pog_records::HealthRecord;
use pog_signed::{Envelope, GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The page (its script asks for `/v1/overview`).
pub const PAGE_HTML: &str = include_str!("overview.html");

/// A GPU's latest records searched for its latest health record (a round stores up to three:
/// proof, memory, health).
pub const RECORDS_SEARCHED: usize = 12;

/// The most GPUs one page of `GET /v1/overview` lists.
pub const MAX_OVERVIEW_PAGE: usize = 500;

/// A GPU's latest health record, as the overview shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatestHealth {
    /// When the validator stored it (Unix ms).
    pub recorded_at_ms: u64,
    /// Its window's start (Unix ms, the validator's clock).
    pub from_ms: u64,
    /// Its window's end.
    pub to_ms: u64,
    /// "ok", "warning", "critical", "failed" (the agent did not answer well), or "simulated".
    pub status: &'static str,
    /// Why there is no report, when there is none.
    pub failure: Option<String>,
    /// Self-reported: samples in the window.
    pub samples: Option<u64>,
    /// Self-reported: GPU temperature over the window, °C.
    pub temp_gpu_c: Option<SignalSummary>,
    /// Self-reported: power over the window, W.
    pub power_w: Option<SignalSummary>,
    /// Self-reported: GPU utilization over the window, %.
    pub util_gpu_pct: Option<SignalSummary>,
    /// Self-reported: the alerts listed, counted by severity.
    pub alerts: BTreeMap<String, u64>,
    /// Self-reported: all alerts raised in the window.
    pub alerts_total: Option<u64>,
    /// Self-reported: XIDs seen in the window.
    pub xid_total: Option<u64>,
    /// Self-reported: their codes (the first few).
    pub xids: Vec<u32>,
    /// Measured: the median of this validator's GEMM proof times over their bounds.
    pub median_ratio: Option<f64>,
    /// Measured: the median against the GPU's earlier proofs, less 1 (above 0: slower).
    pub decay: Option<f64>,
    /// Where the report and the measurement disagree.
    pub contradictions: Vec<String>,
}

/// One GPU of the overview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverviewGpu {
    /// Its UUID.
    pub uuid: GpuUuid,
    /// Its model, as registered.
    pub model: String,
    /// Its PCI address, as registered.
    pub bus_id: String,
    /// Its agent's public key.
    pub agent: PublicKey,
    /// A GPU of the simulated test double.
    pub simulated: bool,
    /// Its latest health record, when one is among its latest records.
    pub health: Option<LatestHealth>,
}

/// One page of the overview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    /// The GPUs, by UUID.
    pub gpus: Vec<OverviewGpu>,
    /// The last UUID listed, when there may be more (pass it as `after`).
    pub next_after: Option<GpuUuid>,
}

/// The latest health record among a GPU's records (oldest first, as stored envelopes).
pub fn latest_health(records: &[(i64, String)]) -> Option<HealthRecord> {
    records.iter().rev().find_map(|(_, json)| {
        let envelope: Envelope = serde_json::from_str(json).ok()?;
        (envelope.kind == RecordKind::HealthRound.wire_kind())
            .then(|| serde_json::from_str(&envelope.body).ok())
            .flatten()
    })
}

/// What the overview shows of a health record.
pub fn summarize(record: &HealthRecord) -> LatestHealth {
    let reported = record.reported.as_ref();
    let signal = |name: &str| reported.and_then(|r| r.signals.get(name).copied());
    let mut alerts = BTreeMap::new();
    for alert in reported.into_iter().flat_map(|r| &r.alerts) {
        *alerts.entry(alert.severity.clone()).or_insert(0) += 1;
    }
    let xid_total = reported.map(|r| r.xid_total);
    let status = if record.simulated {
        "simulated"
    } else if record.failure.is_some() {
        "failed"
    } else if alerts.contains_key("critical") || xid_total.is_some_and(|n| n > 0) {
        "critical"
    } else if alerts.contains_key("warning") || !record.contradictions.is_empty() {
        "warning"
    } else {
        "ok"
    };
    LatestHealth {
        recorded_at_ms: record.recorded_at_ms,
        from_ms: record.from_ms,
        to_ms: record.to_ms,
        status,
        failure: record.failure.as_ref().map(|f| f.message.clone()),
        samples: reported.map(|r| r.samples),
        temp_gpu_c: signal("temp_gpu"),
        power_w: signal("power_w"),
        util_gpu_pct: signal("util_gpu"),
        alerts,
        alerts_total: reported.map(|r| r.alerts_total),
        xid_total,
        xids: reported.map(|r| r.xids.clone()).unwrap_or_default(),
        median_ratio: record.measured.median_ratio,
        decay: record.measured.decay,
        contradictions: record.contradictions.clone(),
    }
}

/// `GET /v1/overview`'s query.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    after: String,
    limit: Option<usize>,
}

/// `GET /v1/overview?after=UUID&limit=N` (100 by default, at most [`MAX_OVERVIEW_PAGE`]).
async fn overview(
    State(v): State<Arc<Validator>>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let limit = page.limit.unwrap_or(100).clamp(1, MAX_OVERVIEW_PAGE);
    let records = v.records().clone();
    let read = tokio::task::spawn_blocking(move || {
        records.read(|r| {
            let gpus = r.gpus(&page.after, limit)?;
            let mut listed = Vec::with_capacity(gpus.len());
            for g in gpus {
                let latest = r.latest_records(g.uuid.as_str(), RECORDS_SEARCHED)?;
                listed.push(OverviewGpu {
                    health: latest_health(&latest).as_ref().map(summarize),
                    uuid: g.uuid,
                    model: g.model,
                    bus_id: g.bus_id,
                    agent: g.agent,
                    simulated: g.simulated,
                });
            }
            Ok::<_, crate::registry::RegistryError>(listed)
        })
    })
    .await
    .map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the registry read failed",
        )
    })?
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let next_after = (read.len() == limit)
        .then(|| read.last().map(|g| g.uuid.clone()))
        .flatten();
    Ok(axum::Json(Overview {
        gpus: read,
        next_after,
    })
    .into_response())
}

/// `GET /overview`: the page.
async fn page() -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(PAGE_HTML)).into_response()
}

/// `GET /v1/overview` and `GET /overview`.
pub fn router(validator: Arc<Validator>) -> Router {
    Router::new()
        .route("/v1/overview", get(overview))
        .route("/overview", get(page))
        .with_state(validator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_proof::wire::{HealthAlert, HealthSummary};
    use pog_records::{Failure, FailureKind, ProofPace};

    fn record() -> HealthRecord {
        let summary = SignalSummary {
            min: 40.0,
            mean: 50.0,
            max: 62.0,
            n: 10,
        };
        HealthRecord {
            version: 1,
            record_id: "r1".into(),
            gpu_uuid: "GPU-o".parse().unwrap(),
            agent: pog_signed::Identity::from_seed([3; 32]).public_key(),
            model: "H200 SXM".into(),
            simulated: false,
            from_ms: 1_000,
            to_ms: 61_000,
            reported: Some(HealthSummary {
                request_id: "q".into(),
                gpu_uuid: "GPU-o".parse().unwrap(),
                from_ms: 1_000,
                to_ms: 61_000,
                simulated: false,
                samples: 10,
                signals: [("temp_gpu".to_string(), summary)].into_iter().collect(),
                alerts: vec![HealthAlert {
                    t_ms: 5_000,
                    kind: "throttling".into(),
                    severity: "warning".into(),
                }],
                alerts_total: 1,
                xids: Vec::new(),
                xid_total: 0,
            }),
            failure: None,
            measured: ProofPace {
                ratios: vec![0.8],
                memory_ratios: Vec::new(),
                median_ratio: Some(0.8),
                baseline_ratio: None,
                decay: None,
            },
            contradictions: Vec::new(),
            recorded_at_ms: 61_500,
        }
    }

    #[test]
    fn the_summary_keeps_reported_and_measured_apart_and_rates_the_worst() {
        let r = record();
        let s = summarize(&r);
        assert_eq!(s.status, "warning");
        assert_eq!(s.temp_gpu_c.map(|t| t.max), Some(62.0));
        assert_eq!(s.power_w, None, "not reported");
        assert_eq!(s.alerts.get("warning"), Some(&1));
        assert_eq!(
            (s.samples, s.xid_total, s.median_ratio),
            (Some(10), Some(0), Some(0.8))
        );

        let mut xid = r.clone();
        let reported = xid.reported.as_mut().unwrap();
        (reported.xids, reported.xid_total) = (vec![79], 1);
        assert_eq!(summarize(&xid).status, "critical");

        let mut quiet = r.clone();
        quiet.reported.as_mut().unwrap().alerts.clear();
        assert_eq!(summarize(&quiet).status, "ok");
        quiet.contradictions = vec!["proofs 20 % slower".into()];
        assert_eq!(summarize(&quiet).status, "warning");

        let mut failed = r.clone();
        failed.reported = None;
        failed.failure = Some(Failure {
            kind: FailureKind::Unreachable,
            message: "the agent did not answer".into(),
        });
        let f = summarize(&failed);
        assert_eq!((f.status, f.samples), ("failed", None));
        assert_eq!(f.failure.as_deref(), Some("the agent did not answer"));

        let mut simulated = r;
        simulated.simulated = true;
        assert_eq!(summarize(&simulated).status, "simulated");
    }

    #[test]
    fn the_latest_health_record_is_found_among_other_records() {
        let identity = pog_signed::Identity::from_seed([4; 32]);
        let (mut older, newer) = (record(), record());
        older.record_id = "r0".into();
        let sealed = |r: &HealthRecord| {
            serde_json::to_string(
                &identity
                    .seal(RecordKind::HealthRound.wire_kind(), r)
                    .unwrap(),
            )
            .unwrap()
        };
        let other = serde_json::to_string(&identity.seal("something-else", &1u8).unwrap()).unwrap();
        let stored = vec![
            (1, sealed(&older)),
            (2, sealed(&newer)),
            (3, other),
            (4, "not an envelope".to_string()),
        ];
        assert_eq!(
            latest_health(&stored).map(|r| r.record_id),
            Some("r1".into())
        );
        assert_eq!(latest_health(&stored[2..]), None);
    }

    #[test]
    fn the_page_asks_for_the_overview_and_fetches_nothing_else() {
        assert!(PAGE_HTML.contains("/v1/overview"));
        assert!(!PAGE_HTML.contains("https://") && !PAGE_HTML.contains("src=\"http"));
        assert!(!PAGE_HTML.contains("http-equiv=\"refresh\""));
    }
}
