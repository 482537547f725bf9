//! The validator's `/metrics` (OpenMetrics, for Prometheus): what it measured itself of each
//! registered GPU. `pog_last_proof_ratio{gpu, model, proof, timed_by="validator"}` is the last
//! validator-timed proof's time over its bound (below 1 passes; `proof` is `gemm` or
//! `memory`), and `pog_last_proof_accepted` whether that proof was accepted: the figures a
//! fleet's dashboard alerts on. An agent's `/metrics` carries its own timing of its proofs
//! under the same name with `timed_by="agent"` (`pog_agent::own_timing`): what it says, where
//! this page is what decides.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use pog_net::locked::Locked;
use pog_signed::GpuUuid;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The content type of the page ([`Proofs::render`]).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A GPU's last proof of one kind, as the validator timed it.
#[derive(Debug, Clone, PartialEq)]
struct LastProof {
    model: String,
    /// Time over the bound; `None` when the exchange ended without a verdict.
    ratio: Option<f64>,
    accepted: bool,
}

/// The last proofs of every GPU the validator challenged since it started.
#[derive(Debug, Default)]
pub struct Proofs {
    /// Keyed by GPU and the proof's kind (`pog_records::ProofKind::NAME`).
    last: Mutex<BTreeMap<(GpuUuid, &'static str), LastProof>>,
}

type GaugeFamily = Family<Vec<(String, String)>, Gauge<f64, AtomicU64>>;

impl Proofs {
    /// Notes a proof of `gpu` (registered as `model`) just recorded.
    pub fn note(
        &self,
        gpu: &GpuUuid,
        model: &str,
        proof: &'static str,
        ratio: Option<f64>,
        accepted: bool,
    ) {
        self.last.locked().insert(
            (gpu.clone(), proof),
            LastProof {
                model: model.to_string(),
                ratio,
                accepted,
            },
        );
    }

    /// Forgets a GPU taken off the registry.
    pub fn forget(&self, gpu: &str) {
        self.last.locked().retain(|(g, _), _| g.as_str() != gpu);
    }

    /// The page: one sample per GPU and proof (a proof without a verdict has no ratio).
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        let ratio = GaugeFamily::default();
        registry.register(
            "pog_last_proof_ratio",
            "The last validator-timed proof: time over its bound (below 1 passes)",
            ratio.clone(),
        );
        let accepted = GaugeFamily::default();
        registry.register(
            "pog_last_proof_accepted",
            "1 when the last proof was accepted, 0 when it failed or got no answer",
            accepted.clone(),
        );
        for ((gpu, proof), last) in self.last.locked().iter() {
            let labels = vec![
                ("gpu".to_string(), gpu.to_string()),
                ("model".to_string(), last.model.clone()),
                ("proof".to_string(), proof.to_string()),
                ("timed_by".to_string(), "validator".to_string()),
            ];
            if let Some(r) = last.ratio {
                ratio.get_or_create(&labels).set(r);
            }
            accepted
                .get_or_create(&labels)
                .set(if last.accepted { 1.0 } else { 0.0 });
        }
        let mut out = String::new();
        encode(&mut out, &registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_each_gpus_last_proofs() {
        let proofs = Proofs::default();
        let gpu: GpuUuid = "GPU-1".parse().unwrap();
        proofs.note(&gpu, "H200 SXM", "gemm", Some(0.5), true);
        proofs.note(&gpu, "H200 SXM", "gemm", Some(0.97), true);
        proofs.note(&gpu, "H200 SXM", "memory", None, false);
        let page = proofs.render().unwrap();
        assert!(
            page.contains(
                "pog_last_proof_ratio{gpu=\"GPU-1\",model=\"H200 SXM\",proof=\"gemm\",timed_by=\"validator\"} 0.97"
            ),
            "{page}"
        );
        assert!(!page.contains("} 0.5"), "{page}");
        assert!(
            page.contains(
                "pog_last_proof_accepted{gpu=\"GPU-1\",model=\"H200 SXM\",proof=\"memory\",timed_by=\"validator\"} 0.0"
            ),
            "{page}"
        );
        assert!(page.ends_with("# EOF\n"), "{page}");
        proofs.forget("GPU-1");
        assert!(!proofs.render().unwrap().contains("GPU-1"));
    }
}
