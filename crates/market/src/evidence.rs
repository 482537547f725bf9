//! Uptime and anomalies from the validator's own records: what the score's reliability
//! ([`crate::score::reliability`], pure, over counts and fractions) reads of a GPU's rounds and
//! health records. [`crate::appraisal`] picks the window; this module reads and counts.
//!
//! - **Uptime.** A round is one of the validator's scheduled rounds for the GPU, as it recorded
//!   it: a proof record (the GPU was *proven* when its proofs of the round were accepted; it
//!   *failed* when the agent answered wrongly or its answer broke the protocol; it was
//!   *unanswered* when the exchange failed as unreachable, timed out or ran past its deadline:
//!   `pog_records::FailureKind::is_unreachable`, which also backs the schedule off) or a missed-round record (the validator did not challenge the GPU that
//!   round because its agent had not answered the rounds before: the schedule's back-off).
//!   Uptime is proven rounds over rounds: a round nobody can vouch for is not up, whether the
//!   agent was silent or wrong. Only rounds recorded count, so a GPU registered recently is
//!   judged over its own rounds, and a round the validator itself did not run (it was down)
//!   counts against nobody.
//! - **Anomalies.** From the GPU's health records ([`HealthEvidence`]), each counted once
//!   however many overlapping windows report it ([`anomalies`]): the agent's warning and
//!   critical alerts (1 per kind per window; its `xid` alerts are the XIDs below), the XID
//!   codes it saw (1 per code per window, application codes left out), the validator's own
//!   finding that the window's proofs ran slower than the GPU's earlier ones
//!   ([`ReliabilityConfig::measured_weight`] each: it timed them itself, no agent can hide it),
//!   a quiet report beside such a slow-down (1: the agent's reports are not to be believed),
//!   and windows the agent did not report (1 in all: unknown is not clean).

use crate::config::ReliabilityConfig;
use pog_proof::wire::HealthSummary;
use pog_records::HealthRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How many anomalies [`Anomalies::detail`] names before "and N more".
const NAMED: usize = 6;

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvidenceError {
    /// A readable record whose values cannot be right.
    #[error("record {id} ({kind}): {why}")]
    Invalid {
        /// The record's number in the validator's store.
        id: i64,
        /// What it was read as (`health record`, `missed-round record`).
        kind: &'static str,
        /// What cannot be right, in words.
        why: String,
    },
}

/// A time in ms since the Unix epoch in RFC 3339, to the second (`2026-12-03T11:34:05Z`).
pub fn utc(at_ms: u64) -> String {
    // RFC 3339 ends with the year 9999; a later time (only a hostile peer sends one) is shown
    // as its number rather than failing to format.
    const LAST_MS: u64 = 253_402_300_799_999;
    if at_ms > LAST_MS {
        return format!("{at_ms} ms after 1970 (past 9999)");
    }
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A round the validator's schedule did not challenge the GPU in because its agent had not
/// answered the rounds before (the validator's `round-missed` record, `pog_records::MissedRound`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissedRound {
    /// The record's number in the validator's store.
    pub id: i64,
    /// When the validator stored it, ms since the Unix epoch.
    pub recorded_at_ms: u64,
    /// The agent that owned the GPU then.
    pub agent: String,
    /// Why, in the validator's words.
    pub reason: String,
    /// The fleet missed it (a validator stopped in its slot), not the GPU: the uptime does
    /// not count it.
    #[serde(default)]
    pub fleet: bool,
}

impl MissedRound {
    /// What the uptime reads of a missed-round record.
    pub fn from_record(id: i64, record: &pog_records::MissedRound) -> MissedRound {
        MissedRound {
            id,
            recorded_at_ms: record.recorded_at_ms,
            agent: record.agent.to_string(),
            reason: record.reason.clone(),
            fleet: record.cause == pog_records::MissedCause::Fleet,
        }
    }
}

/// One scheduled round as the uptime counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// The round's proofs were accepted: the GPU was up and proven.
    Proven {
        /// When the round was recorded, ms since the Unix epoch.
        at_ms: u64,
    },
    /// The agent answered, but wrongly (a rejected or malformed answer, a protocol breach, an
    /// HTTP error): the GPU was not proven that round.
    Failed {
        /// When the round was recorded, ms since the Unix epoch.
        at_ms: u64,
    },
    /// The validator challenged the GPU and nothing came back in time.
    Unanswered {
        /// When the round was recorded, ms since the Unix epoch.
        at_ms: u64,
    },
    /// The validator did not challenge it, backing off after unanswered rounds.
    Skipped {
        /// When the round was recorded, ms since the Unix epoch.
        at_ms: u64,
    },
}

impl Round {
    /// When the round was recorded, ms since the Unix epoch.
    pub fn at_ms(self) -> u64 {
        match self {
            Round::Proven { at_ms }
            | Round::Failed { at_ms }
            | Round::Unanswered { at_ms }
            | Round::Skipped { at_ms } => at_ms,
        }
    }
}

/// The uptime over a window of rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Uptime {
    /// Rounds in the window.
    pub rounds: u32,
    /// Rounds the agent answered, rightly or wrongly (`proven + failed`).
    pub answered: u32,
    /// Rounds whose proofs were accepted.
    #[serde(default)]
    pub proven: u32,
    /// Rounds answered wrongly.
    #[serde(default)]
    pub failed: u32,
    /// Rounds in which the validator challenged the GPU and nothing came back in time.
    pub unanswered: u32,
    /// Rounds the schedule skipped, backing off after unanswered ones.
    pub skipped: u32,
    /// `proven / rounds`.
    pub fraction: f64,
    /// When the window's first round was recorded.
    pub since_ms: u64,
}

impl Uptime {
    /// The uptime over `rounds` (oldest first); `None` without any.
    pub fn over(rounds: &[Round]) -> Option<Uptime> {
        let first = rounds.first()?;
        let count = |f: fn(&Round) -> bool| rounds.iter().filter(|r| f(r)).count() as u32;
        let proven = count(|r| matches!(r, Round::Proven { .. }));
        let failed = count(|r| matches!(r, Round::Failed { .. }));
        let unanswered = count(|r| matches!(r, Round::Unanswered { .. }));
        let skipped = count(|r| matches!(r, Round::Skipped { .. }));
        let total = rounds.len() as u32;
        Some(Uptime {
            rounds: total,
            answered: proven + failed,
            proven,
            failed,
            unanswered,
            skipped,
            fraction: f64::from(proven) / f64::from(total),
            since_ms: first.at_ms(),
        })
    }

    /// What the uptime was measured over, in words.
    pub fn detail(&self) -> String {
        let mut missed = Vec::new();
        if self.failed > 0 {
            missed.push(format!("{} answered wrongly", self.failed));
        }
        if self.unanswered > 0 {
            missed.push(format!("{} unanswered", self.unanswered));
        }
        if self.skipped > 0 {
            missed.push(format!("{} skipped while backing off", self.skipped));
        }
        let missed = if missed.is_empty() {
            String::new()
        } else {
            format!(": {}", missed.join(", "))
        };
        format!(
            "proven in {} of {} rounds since {}{missed}",
            self.proven,
            self.rounds,
            utc(self.since_ms)
        )
    }
}

/// One alert of the agent's, as a health record carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedAlert {
    /// When the agent raised it, ms since the Unix epoch.
    pub t_ms: u64,
    /// Which of the agent's detectors raised it (`xid` alerts are the XIDs below).
    pub kind: String,
    /// `info`, `warning` or `critical`; only the last two are anomalies.
    pub severity: String,
}

/// What the agent reported for a window (self-reported).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportedHealth {
    /// Samples the agent took in the window; a report without any counts as unreported.
    pub samples: u64,
    /// The alerts raised, perhaps only the first of them (`alerts_total` counts all).
    pub alerts: Vec<ReportedAlert>,
    /// Alerts raised in the window, listed or not.
    pub alerts_total: u64,
    /// The XID codes seen, perhaps only the first of them (`xid_total` counts all).
    pub xids: Vec<u32>,
    /// XIDs seen in the window, listed or not.
    pub xid_total: u64,
}

impl From<&HealthSummary> for ReportedHealth {
    fn from(summary: &HealthSummary) -> ReportedHealth {
        ReportedHealth {
            samples: summary.samples,
            alerts: summary
                .alerts
                .iter()
                .map(|a| ReportedAlert {
                    t_ms: a.t_ms,
                    kind: a.kind.clone(),
                    severity: a.severity.clone(),
                })
                .collect(),
            alerts_total: summary.alerts_total,
            xids: summary.xids.clone(),
            xid_total: summary.xid_total,
        }
    }
}

impl ReportedHealth {
    /// Whether the report warns of anything: a warning or critical alert, or an XID (the
    /// validator's own rule for a contradiction, `pog_validator::health::contradictions`).
    pub fn warns(&self) -> bool {
        self.xid_total > 0
            || self
                .alerts
                .iter()
                .any(|a| a.severity == "warning" || a.severity == "critical")
    }
}

/// What the anomaly count reads of one of the validator's health records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthEvidence {
    /// The record's number in the validator's store.
    pub id: i64,
    /// When the validator stored it, ms since the Unix epoch.
    pub recorded_at_ms: u64,
    /// The agent asked.
    pub agent: String,
    /// The GPU is the simulated test double (its records are left out of the count).
    pub simulated: bool,
    /// The window's start, ms since the Unix epoch on the validator's clock.
    pub from_ms: u64,
    /// The window's end, likewise (not before `from_ms`).
    pub to_ms: u64,
    /// The agent's summary; `None` when it did not answer well.
    pub reported: Option<ReportedHealth>,
    /// Why there is no summary, in the validator's words.
    pub failure: Option<String>,
    /// The validator's measurement: the window's proofs' median time over the GPU's earlier
    /// ones, minus 1 (above 0: slower).
    pub decay: Option<f64>,
}

impl HealthEvidence {
    /// What the anomaly count reads of a health record, refusing values that cannot be right.
    pub fn from_record(id: i64, b: &HealthRecord) -> Result<HealthEvidence, EvidenceError> {
        const KIND: &str = "health record";
        let invalid = |why: String| EvidenceError::Invalid {
            id,
            kind: KIND,
            why,
        };
        if b.from_ms > b.to_ms {
            return Err(invalid(format!(
                "its window [{}, {}] ms is reversed",
                b.from_ms, b.to_ms
            )));
        }
        if let Some(d) = b.measured.decay.filter(|d| !d.is_finite()) {
            return Err(invalid(format!("its measured decay {d} is not a number")));
        }
        if let Some(r) = &b.reported {
            if let Some(a) = r
                .alerts
                .iter()
                .find(|a| !matches!(a.severity.as_str(), "info" | "warning" | "critical"))
            {
                return Err(invalid(format!(
                    "an alert of unknown severity {:?}",
                    a.severity
                )));
            }
            if r.alerts_total < r.alerts.len() as u64 || r.xid_total < r.xids.len() as u64 {
                return Err(invalid("a total is smaller than what is listed".into()));
            }
        }
        Ok(HealthEvidence {
            id,
            recorded_at_ms: b.recorded_at_ms,
            agent: b.agent.to_string(),
            simulated: b.simulated,
            from_ms: b.from_ms,
            to_ms: b.to_ms,
            reported: b.reported.as_ref().map(ReportedHealth::from),
            failure: b.failure.as_ref().map(|f| f.message.clone()),
            decay: b.measured.decay,
        })
    }

    /// The agent's report, when it is one to read: answered, with samples.
    fn usable_report(&self) -> Option<&ReportedHealth> {
        self.reported.as_ref().filter(|r| r.samples > 0)
    }
}

/// Where an anomaly comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// A warning or critical alert of the agent's detectors (self-reported).
    Alert,
    /// An XID code the agent saw (self-reported).
    Xid,
    /// More XIDs than the report lists, of codes not named (self-reported).
    UnlistedXids,
    /// The window's proofs ran slower than the GPU's earlier ones (measured by the validator).
    MeasuredDecay,
    /// The agent reported nothing wrong while the validator's proofs slowed (the validator's
    /// finding).
    Contradiction,
    /// The agent gave no usable report for the window(s).
    Unreported,
}

/// One anomaly counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    /// Where it comes from.
    pub signal: Signal,
    /// How many anomalies it counts for.
    pub weight: u32,
    /// When: the alert's time, or the end of the window it was found in.
    pub at_ms: u64,
    /// What, in words.
    pub what: String,
}

/// The anomalies counted over a GPU's health records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomalies {
    /// The sum of the weights: what the score counts.
    pub count: u32,
    /// Each anomaly, oldest first.
    pub found: Vec<Anomaly>,
    /// Health records read (simulated ones left out).
    pub records: u32,
    /// Windows without a usable report.
    pub unreported_windows: u32,
}

impl Anomalies {
    /// Which signals were counted, in words (the first few, then how many more).
    pub fn detail(&self) -> String {
        let mut parts: Vec<String> = self
            .found
            .iter()
            .take(NAMED)
            .map(|a| {
                if a.weight > 1 {
                    format!("{}, counts {}", a.what, a.weight)
                } else {
                    a.what.clone()
                }
            })
            .collect();
        if self.found.len() > NAMED {
            parts.push(format!("and {} more", self.found.len() - NAMED));
        }
        parts.join("; ")
    }
}

/// Windows that overlap (share more than an end point) merged: each group of records reports
/// on one stretch of time, so what several of them report is one thing seen several times.
fn merged<'a>(records: &[&'a HealthEvidence]) -> Vec<(u64, u64, Vec<&'a HealthEvidence>)> {
    let mut sorted: Vec<&HealthEvidence> = records.to_vec();
    sorted.sort_by_key(|r| (r.from_ms, r.to_ms, r.id));
    let mut groups: Vec<(u64, u64, Vec<&HealthEvidence>)> = Vec::new();
    for r in sorted {
        match groups.last_mut() {
            Some((_, end, members)) if r.from_ms < *end => {
                *end = (*end).max(r.to_ms);
                members.push(r);
            }
            _ => groups.push((r.from_ms, r.to_ms, vec![r])),
        }
    }
    groups
}

/// The anomalies in `records` (a GPU's health records in the score's window, any order), by
/// `rules`; `None` when there is none to read (no record, or only the simulated double's).
///
/// Each is counted once per group of overlapping windows (in practice, per window: each starts
/// where the last one ended): an alert kind (its worst severity; a condition that warns and
/// then worsens is one incident, and an alert listed by two windows is one alert), an XID
/// code, a measured slow-down and a contradiction; the windows without a usable report (the
/// agent refused or failed the request, or reported no samples) once in all.
pub fn anomalies(records: &[&HealthEvidence], rules: &ReliabilityConfig) -> Option<Anomalies> {
    let real: Vec<&HealthEvidence> = records.iter().copied().filter(|r| !r.simulated).collect();
    if real.is_empty() {
        return None;
    }
    let mut found = Vec::new();
    let ignored: BTreeSet<u32> = rules.ignored_xids.iter().copied().collect();
    let mut unreported_windows = 0u32;
    let mut unreported_last = 0u64;
    // An alert on the end point two windows share is listed by both: counted in the first.
    let mut alerts_seen: BTreeSet<(&str, u64)> = BTreeSet::new();
    for (_, end, group) in merged(&real) {
        let ending = utc(end);
        // Each alert the group's windows list, by (kind, time), with its worst severity.
        let mut listed: BTreeMap<(&str, u64), &str> = BTreeMap::new();
        for report in group.iter().filter_map(|r| r.usable_report()) {
            for a in &report.alerts {
                let counted = matches!(a.severity.as_str(), "warning" | "critical");
                // An XID raises an `xid` alert too: the XID is counted, by its code, below.
                if !counted || a.kind == "xid" {
                    continue;
                }
                let worst = listed.entry((&a.kind, a.t_ms)).or_insert("warning");
                if a.severity == "critical" {
                    *worst = "critical";
                }
            }
        }
        // Per kind: the worst severity, the first time, how many were raised.
        let mut alerts: BTreeMap<&str, (&str, u64, u32)> = BTreeMap::new();
        for ((kind, t_ms), severity) in listed {
            if !alerts_seen.insert((kind, t_ms)) {
                continue;
            }
            let entry = alerts.entry(kind).or_insert((severity, t_ms, 0));
            if severity == "critical" {
                entry.0 = "critical";
            }
            entry.2 += 1;
        }
        for (kind, (severity, first, raised)) in alerts {
            found.push(Anomaly {
                signal: Signal::Alert,
                weight: 1,
                at_ms: first,
                what: if raised == 1 {
                    format!("{kind} alert ({severity}) at {}", utc(first))
                } else {
                    format!(
                        "{kind} alert ({severity}, raised {raised} times from {})",
                        utc(first)
                    )
                },
            });
        }
        let mut codes = BTreeSet::new();
        let mut unlisted = 0u64;
        let mut decay: Option<f64> = None;
        let mut quiet_beside_decay = false;
        let mut unreported = false;
        for r in &group {
            let report = r.usable_report();
            match report {
                Some(report) => {
                    codes.extend(report.xids.iter().copied().filter(|c| !ignored.contains(c)));
                    unlisted = unlisted.max(report.xid_total - report.xids.len() as u64);
                }
                None => unreported = true,
            }
            if let Some(d) = r.decay.filter(|d| *d > rules.decay_threshold) {
                decay = Some(decay.map_or(d, |worst: f64| worst.max(d)));
                quiet_beside_decay |= report.is_some_and(|rep| !rep.warns());
            }
        }
        for code in codes {
            found.push(Anomaly {
                signal: Signal::Xid,
                weight: 1,
                at_ms: end,
                what: format!("xid {code} in the window ending {ending}"),
            });
        }
        if unlisted > 0 {
            found.push(Anomaly {
                signal: Signal::UnlistedXids,
                weight: 1,
                at_ms: end,
                what: format!("{unlisted} more XID(s) not listed, in the window ending {ending}"),
            });
        }
        if let Some(d) = decay {
            found.push(Anomaly {
                signal: Signal::MeasuredDecay,
                weight: rules.measured_weight,
                at_ms: end,
                what: format!(
                    "proofs {:.0} % slower than its earlier ones in the window ending {ending} (timed by the validator)",
                    d * 1e2
                ),
            });
            if quiet_beside_decay {
                found.push(Anomaly {
                    signal: Signal::Contradiction,
                    weight: 1,
                    at_ms: end,
                    what: format!(
                        "the agent reported nothing wrong in the window ending {ending} while its proofs slowed"
                    ),
                });
            }
        }
        if unreported {
            unreported_windows += 1;
            unreported_last = unreported_last.max(end);
        }
    }
    if unreported_windows > 0 {
        found.push(Anomaly {
            signal: Signal::Unreported,
            weight: 1,
            at_ms: unreported_last,
            what: format!(
                "no usable health report for {unreported_windows} of {} window(s), the last ending {}",
                merged(&real).len(),
                utc(unreported_last)
            ),
        });
    }
    found.sort_by_key(|a| (a.at_ms, a.signal));
    let count = found
        .iter()
        .fold(0u32, |sum, a| sum.saturating_add(a.weight));
    Some(Anomalies {
        count,
        found,
        records: real.len() as u32,
        unreported_windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn rules() -> ReliabilityConfig {
        Config::embedded().score.reliability
    }

    fn alert(t_ms: u64, kind: &str, severity: &str) -> ReportedAlert {
        ReportedAlert {
            t_ms,
            kind: kind.into(),
            severity: severity.into(),
        }
    }

    /// A health record over `[from, to]` reporting `alerts` and `xids`, the validator's
    /// measured `decay`.
    fn window(
        id: i64,
        (from_ms, to_ms): (u64, u64),
        alerts: Vec<ReportedAlert>,
        xids: Vec<u32>,
        decay: Option<f64>,
    ) -> HealthEvidence {
        HealthEvidence {
            id,
            recorded_at_ms: to_ms,
            agent: "a".into(),
            simulated: false,
            from_ms,
            to_ms,
            reported: Some(ReportedHealth {
                samples: 60,
                alerts_total: alerts.len() as u64,
                alerts,
                xid_total: xids.len() as u64,
                xids,
            }),
            failure: None,
            decay,
        }
    }

    fn count(records: &[HealthEvidence]) -> u32 {
        let refs: Vec<&HealthEvidence> = records.iter().collect();
        anomalies(&refs, &rules()).map_or(0, |a| a.count)
    }

    #[test]
    fn a_health_record_is_read_from_the_validators_record() {
        let agent = "ab".repeat(32);
        let body = json!({
            "version": 2, "record_id": "health-1", "gpu_uuid": "GPU-1", "agent": agent,
            "model": "H200 SXM", "simulated": false, "from_ms": 1_000, "to_ms": 61_000,
            "reported": {
                "request_id": "r", "gpu_uuid": "GPU-1", "from_ms": 1_000, "to_ms": 61_000,
                "samples": 60, "signals": {"temp_gpu": {"min": 40.0, "mean": 50.0, "max": 60.0, "n": 60}},
                "alerts": [{"t_ms": 30_000, "kind": "xid", "severity": "critical"}],
                "alerts_total": 1, "xids": [79], "xid_total": 1
            },
            "failure": null,
            "measured": {"ratios": [0.7], "memory_ratios": [], "median_ratio": 0.7,
                          "baseline_ratio": 0.5, "decay": 0.4},
            "contradictions": [], "recorded_at_ms": 61_005
        });
        let record = |body: &Value| serde_json::from_value::<HealthRecord>(body.clone()).unwrap();
        let h = HealthEvidence::from_record(4, &record(&body)).unwrap();
        assert_eq!(
            (h.id, h.from_ms, h.to_ms, h.recorded_at_ms),
            (4, 1_000, 61_000, 61_005)
        );
        assert_eq!(h.reported.as_ref().unwrap().xids, vec![79]);
        assert_eq!(h.decay, Some(0.4));
        let mut refused = body.clone();
        refused["reported"] = Value::Null;
        refused["failure"] =
            json!({"kind": "agent_refused", "message": "the agent answered HTTP 404"});
        let h = HealthEvidence::from_record(5, &record(&refused)).unwrap();
        assert_eq!(h.failure.as_deref(), Some("the agent answered HTTP 404"));
        // Bad input: a clear, typed error.
        let mut reversed = body.clone();
        reversed["from_ms"] = json!(70_000);
        assert!(matches!(
            HealthEvidence::from_record(6, &record(&reversed)),
            Err(EvidenceError::Invalid { id: 6, .. })
        ));
        let mut severity = body.clone();
        severity["reported"]["alerts"][0]["severity"] = json!("dire");
        let e = HealthEvidence::from_record(7, &record(&severity)).unwrap_err();
        assert!(e.to_string().contains("unknown severity \"dire\""), "{e}");
        let mut totals = body.clone();
        totals["reported"]["xid_total"] = json!(0);
        assert!(HealthEvidence::from_record(8, &record(&totals)).is_err());
        let missed = json!({"version": 2, "record_id": "missed-1", "gpu_uuid": "GPU-1",
            "agent": agent, "model": "H200 SXM", "reason": "backing off", "recorded_at_ms": 5});
        let m = MissedRound::from_record(3, &serde_json::from_value(missed).unwrap());
        assert_eq!((m.id, m.recorded_at_ms, &m.agent), (3, 5, &agent));
    }

    #[test]
    fn alerts_xids_and_the_validators_findings_count_with_their_weights() {
        let quiet = window(1, (0, 60_000), vec![], vec![], None);
        let none = anomalies(&[&quiet], &rules()).unwrap();
        assert_eq!((none.count, none.records), (0, 1));
        // Info alerts and application XIDs (43) count nothing; the XID's own alert is the XID.
        let noisy = window(
            2,
            (60_000, 120_000),
            vec![
                alert(61_000, "clock_drop", "info"),
                alert(62_000, "xid", "critical"),
                alert(63_000, "thermal_runaway", "warning"),
                alert(64_000, "throttling", "critical"),
            ],
            vec![79, 79, 43],
            None,
        );
        let a = anomalies(&[&quiet, &noisy], &rules()).unwrap();
        assert_eq!(a.count, 3, "{a:?}");
        let d = a.detail();
        assert!(
            d.contains("thermal_runaway alert (warning) at 1970-01-01T00:01:03Z"),
            "{d}"
        );
        assert!(d.contains("throttling alert (critical)"), "{d}");
        assert!(
            d.contains("xid 79 in the window ending 1970-01-01T00:02:00Z"),
            "{d}"
        );
        assert!(!d.contains("xid 43"), "{d}");
        // The validator's measured slow-down counts twice; beside a quiet report, once more:
        // an agent that hides what the proofs show gains nothing over one that reports it.
        let slow_quiet = window(3, (120_000, 180_000), vec![], vec![], Some(0.3));
        let slow_warned = window(
            3,
            (120_000, 180_000),
            vec![alert(150_000, "throttling", "warning")],
            vec![],
            Some(0.3),
        );
        assert_eq!(count(std::slice::from_ref(&slow_quiet)), 3);
        assert_eq!(count(&[slow_warned]), 3);
        let found = anomalies(&[&slow_quiet], &rules()).unwrap();
        assert!(found.detail().contains("30 % slower"), "{}", found.detail());
        assert!(found.detail().contains("counts 2"), "{}", found.detail());
        // Below the threshold, nothing.
        assert_eq!(count(&[window(4, (0, 1), vec![], vec![], Some(0.05))]), 0);
        // Unlisted XIDs count once per window group.
        let mut overflow = window(5, (0, 60_000), vec![], vec![13], None);
        overflow.reported.as_mut().unwrap().xid_total = 70;
        let a = anomalies(&[&overflow], &rules()).unwrap();
        assert_eq!(a.count, 2);
        assert!(a.detail().contains("69 more XID(s)"), "{}", a.detail());
        // Only the simulated double: nothing to read.
        let mut sim = quiet.clone();
        sim.simulated = true;
        assert_eq!(anomalies(&[&sim], &rules()), None);
        assert_eq!(anomalies(&[], &rules()), None);
    }

    #[test]
    fn windows_the_agent_did_not_report_count_once_in_all() {
        let refused = |id: i64, from: u64| HealthEvidence {
            reported: None,
            failure: Some("the agent answered HTTP 404".into()),
            ..window(id, (from, from + 60_000), vec![], vec![], None)
        };
        let one = anomalies(&[&refused(1, 0)], &rules()).unwrap();
        assert_eq!((one.count, one.unreported_windows), (1, 1));
        let many: Vec<HealthEvidence> = (0..10).map(|i| refused(i, i as u64 * 60_000)).collect();
        let a = anomalies(&many.iter().collect::<Vec<_>>(), &rules()).unwrap();
        assert_eq!((a.count, a.unreported_windows), (1, 10));
        assert!(
            a.detail().contains("no usable health report for 10 of 10"),
            "{}",
            a.detail()
        );
        // No samples is no report either; the validator's own finding still counts.
        let mut empty = window(11, (0, 60_000), vec![], vec![], Some(0.5));
        empty.reported.as_mut().unwrap().samples = 0;
        let a = anomalies(&[&empty], &rules()).unwrap();
        assert_eq!(a.count, 2 + 1, "{a:?}");
        assert!(a.found.iter().all(|f| f.signal != Signal::Contradiction));
    }

    #[test]
    fn the_same_alert_in_overlapping_windows_counts_once() {
        let a = window(
            1,
            (0, 100_000),
            vec![alert(50_000, "thermal_runaway", "warning")],
            vec![79],
            Some(0.2),
        );
        let b = window(
            2,
            (40_000, 160_000),
            vec![
                alert(50_000, "thermal_runaway", "critical"),
                alert(150_000, "thermal_runaway", "warning"),
            ],
            vec![79],
            Some(0.3),
        );
        let found = anomalies(&[&a, &b], &rules()).unwrap();
        // One thermal incident (two alerts, the worst severity kept), xid 79 once, one
        // slow-down (counting 2).
        assert_eq!(found.count, 1 + 1 + 2, "{found:?}");
        let d = found.detail();
        assert!(
            d.contains(
                "thermal_runaway alert (critical, raised 2 times from 1970-01-01T00:00:50Z)"
            ),
            "{d}"
        );
        assert!(d.contains("30 % slower"), "{d}");
        // Windows that only touch are apart: an XID in each is two.
        let c = window(3, (160_000, 220_000), vec![], vec![79], None);
        assert_eq!(count(&[a.clone(), b.clone(), c]), 5);
        // An alert on the shared end point, listed by both windows, is one alert.
        let left = window(
            4,
            (0, 60_000),
            vec![alert(60_000, "throttling", "warning")],
            vec![],
            None,
        );
        let right = window(
            5,
            (60_000, 120_000),
            vec![alert(60_000, "throttling", "warning")],
            vec![],
            None,
        );
        assert_eq!(count(&[left, right]), 1);
    }

    #[test]
    fn a_lasting_condition_counts_once_per_window() {
        // Raised, worsened and reminded within one window: one incident.
        let one = window(
            1,
            (0, 60_000),
            vec![
                alert(1_000, "thermal_runaway", "warning"),
                alert(2_000, "thermal_runaway", "critical"),
                alert(3_000, "clock_drop", "warning"),
            ],
            vec![],
            None,
        );
        assert_eq!(count(&[one]), 2);
        // Still raised in the next rounds' windows: once more each.
        let rounds: Vec<HealthEvidence> = (0..3)
            .map(|i| {
                let from = i * 60_000;
                window(
                    i as i64,
                    (from, from + 60_000),
                    vec![alert(from + 30_000, "throttling", "warning")],
                    vec![],
                    None,
                )
            })
            .collect();
        assert_eq!(count(&rounds), 3);
    }

    #[test]
    fn uptime_counts_proven_rounds_over_rounds() {
        assert_eq!(Uptime::over(&[]), None);
        let rounds = [
            Round::Proven { at_ms: 0 },
            Round::Unanswered { at_ms: 60_000 },
            Round::Skipped { at_ms: 120_000 },
            Round::Proven { at_ms: 180_000 },
            Round::Failed { at_ms: 240_000 },
        ];
        let u = Uptime::over(&rounds).unwrap();
        assert_eq!(
            (
                u.rounds,
                u.answered,
                u.proven,
                u.failed,
                u.unanswered,
                u.skipped
            ),
            (5, 3, 2, 1, 1, 1)
        );
        // A wrong answer is an answer, but not an hour anyone can vouch for.
        assert_eq!(u.fraction, 0.4);
        assert_eq!(
            u.detail(),
            "proven in 2 of 5 rounds since 1970-01-01T00:00:00Z: 1 answered wrongly, 1 unanswered, 1 skipped while backing off"
        );
    }

    #[test]
    fn utc_names_the_civil_date() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_297_645_999), "2026-12-03T11:34:05Z");
        // The last second RFC 3339 can name, and past it (a hostile peer's time): no panic.
        assert_eq!(utc(253_402_300_799_999), "9999-12-31T23:59:59Z");
        assert!(utc(253_402_300_800_000).contains("past 9999"));
        assert!(utc(u64::MAX).contains("past 9999"));
    }

    /// A random stretch of time with alert and XID events, and windows over it (overlapping,
    /// repeated, in any order), each reporting what happened inside it.
    /// Events `(t_ms, alert kind, XID code)` and windows `(from_ms, length)`.
    type Stretch = (Vec<(u64, u8, u32)>, Vec<(u64, u64)>);

    fn events_and_windows() -> impl Strategy<Value = Stretch> {
        (
            prop::collection::vec((0u64..2_000, 0u8..4, 0u32..3), 0..30),
            prop::collection::vec((0u64..2_000, 1u64..600), 1..10),
        )
    }

    const KINDS: [&str; 4] = ["thermal_runaway", "throttling", "clock_drop", "memory_leak"];
    const CODES: [u32; 3] = [79, 48, 43];

    fn reports(events: &[(u64, u8, u32)], windows: &[(u64, u64)]) -> Vec<HealthEvidence> {
        windows
            .iter()
            .enumerate()
            .map(|(i, &(from, len))| {
                let inside = |t: &u64| (from..=from + len).contains(t);
                let alerts = events
                    .iter()
                    .filter(|(t, _, _)| inside(t))
                    .map(|&(t, k, _)| alert(t, KINDS[k as usize], "warning"))
                    .collect();
                let xids = events
                    .iter()
                    .filter(|(t, _, _)| inside(t))
                    .map(|&(_, _, c)| CODES[c as usize])
                    .collect();
                window(i as i64, (from, from + len), alerts, xids, None)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// However the windows overlap, the alerts count between the kinds and the alerts any
        /// window saw (an alert no window saw, never); windows over one common moment are one
        /// stretch of time, in which each kind counts once.
        #[test]
        fn alerts_count_once_however_the_windows_overlap((events, windows) in events_and_windows(), common in prop::bool::ANY) {
            let windows: Vec<(u64, u64)> = if common {
                // Every window covers [999, 1001], so each overlaps every other.
                windows.iter().map(|&(f, l)| (f.min(999), l.max(1_001 - f.min(999)))).collect()
            } else {
                windows
            };
            let records = reports(&events, &windows);
            let refs: Vec<&HealthEvidence> = records.iter().collect();
            let found = anomalies(&refs, &rules()).unwrap();
            let alerts = found.found.iter().filter(|a| a.signal == Signal::Alert).count();
            let seen: BTreeSet<(u64, u8)> = events
                .iter()
                .filter(|(t, _, _)| windows.iter().any(|&(f, l)| (f..=f + l).contains(t)))
                .map(|&(t, k, _)| (t, k))
                .collect();
            let kinds: BTreeSet<u8> = seen.iter().map(|&(_, k)| k).collect();
            prop_assert!(alerts >= kinds.len() && alerts <= seen.len(), "{} not in [{}, {}]", alerts, kinds.len(), seen.len());
            if common {
                prop_assert_eq!(alerts, kinds.len());
            }
        }

        /// A window reported again, and the order records come in, change nothing; a window
        /// more never lowers the count.
        #[test]
        fn repeats_and_order_change_nothing((events, windows) in events_and_windows(), again in 0usize..10, decay in prop::option::of(0.0f64..1.0)) {
            let mut records = reports(&events, &windows);
            if let Some(first) = records.first_mut() {
                first.decay = decay;
            }
            let base = count(&records);
            let mut repeated = records.clone();
            let copy = records[again % records.len()].clone();
            repeated.push(HealthEvidence { id: 999, ..copy });
            prop_assert_eq!(count(&repeated), base);
            let mut reversed = records.clone();
            reversed.reverse();
            prop_assert_eq!(count(&reversed), base);
            // Anything a window more reports is never fewer anomalies.
            let mut more = records.clone();
            more.push(window(1000, (5_000, 5_100), vec![alert(5_050, "throttling", "critical")], vec![79], None));
            prop_assert!(count(&more) > base);
        }

        /// Over windows that do not overlap (each starting where the last ended, as the
        /// validator asks for them), each window's alert kinds and XID codes count once each.
        #[test]
        fn kinds_and_codes_count_once_per_window(per_window in prop::collection::vec(prop::collection::vec((0u8..4, 0u32..3, 1u64..999), 0..6), 1..8)) {
            let records: Vec<HealthEvidence> = per_window
                .iter()
                .enumerate()
                .map(|(i, events)| {
                    let from = i as u64 * 1_000;
                    let alerts = events.iter().map(|&(k, _, dt)| alert(from + dt, KINDS[k as usize], "critical")).collect();
                    let xids = events.iter().map(|&(_, c, _)| CODES[c as usize]).collect();
                    window(i as i64, (from, from + 1_000), alerts, xids, None)
                })
                .collect();
            let expected: usize = per_window
                .iter()
                .map(|events| {
                    let kinds = events.iter().map(|&(k, _, _)| k).collect::<BTreeSet<_>>().len();
                    let codes = events.iter().map(|&(_, c, _)| CODES[c as usize]).filter(|c| *c != 43).collect::<BTreeSet<_>>().len();
                    kinds + codes
                })
                .sum();
            prop_assert_eq!(count(&records) as usize, expected);
        }
    }
}
