//! Findings: what inspection concluded, how bad it is, and the evidence behind it.

use pog_facts::BusId;
use serde::{Deserialize, Serialize};

/// How much a finding matters. A `Fail` makes `pog inspect` exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; changes no verdict.
    Info,
    /// Makes the GPU worth less or needs a look, but does not make it suspect.
    Warn,
    /// Contradicts a genuine GPU: its GPU (or, host-wide, every GPU) is suspect.
    Fail,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Fail => "FAIL",
        })
    }
}

/// One source's value, as shown in a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Where the value came from: a source (`NVML`, `sysfs`, …) or what it is (`expected`).
    pub source: String,
    /// The value as that source gave it, formatted for display.
    pub value: String,
}

/// One conclusion of one rule, about one GPU or (with `gpu: None`) the whole host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable rule id, e.g. `spec.memory` (documented in docs/inspect.md).
    pub rule: String,
    /// How bad it is; the worst finding sets the exit status.
    pub severity: Severity,
    /// The GPU it concerns, by PCI bus id; `None` for the whole host.
    pub gpu: Option<BusId>,
    /// What is wrong, in one sentence for the operator.
    pub message: String,
    /// Each source's value behind the conclusion, in the order added.
    pub evidence: Vec<Evidence>,
}

impl Finding {
    /// A finding with no evidence yet; add it with [`Finding::with`].
    pub fn new(
        rule: &str,
        severity: Severity,
        gpu: Option<BusId>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            rule: rule.to_string(),
            severity,
            gpu,
            message: message.into(),
            evidence: Vec::new(),
        }
    }

    /// Adds one piece of evidence.
    pub fn with(mut self, source: &str, value: impl std::fmt::Display) -> Finding {
        self.evidence.push(Evidence {
            source: source.to_string(),
            value: value.to_string(),
        });
        self
    }
}
