//! The `gpu-state` record ([`RecordKind::GpuState`]): a GPU's state in the fixed form that a
//! contract reads (docs/ledger.md, "Scores on chain").
//!
//! The validator logs one beside every score it logs (when a GPU's score or price changes).
//! Its JSON is compact with the fields in the order of [`GpuState`] and nothing optional, so
//! that `contracts/GpuScores.sol` can write the same bytes from typed fields and prove them a
//! leaf of an anchored checkpoint without parsing JSON: strings plain (a field that JSON would
//! escape cannot be proven on chain), integers in decimal, the owner as `0x` and 40 lowercase
//! hex digits.

use pog_signed::{EvmAddress, GpuUuid, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// Version of the `gpu-state` body (the contract's `STATE_VERSION`).
pub const STATE_VERSION: u32 = 1;

/// A GPU's state for the chain ([`RecordKind::GpuState`], validator-signed). Serialized with
/// serde in field order; `contracts/GpuScores.sol`'s `bodyOf` writes the same bytes (a test on
/// a real chain checks the two agree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuState {
    /// Body schema version ([`STATE_VERSION`]).
    pub version: u32,
    /// The GPU.
    pub gpu_uuid: GpuUuid,
    /// The model it is registered as ("" when it is not registered any more).
    pub model: String,
    /// Its latest GEMM proof was accepted and speaks for the model.
    pub proves_model: bool,
    /// Its latest proof of memory was accepted and speaks for the model.
    pub proves_memory: bool,
    /// The score in millionths (1,000,000 = the reference H200 host).
    pub score_ppm: u64,
    /// The posted price per GPU-hour in micro-dollars; 0 when it is not priced.
    pub price_micro_usd: u64,
    /// The address its owner named to hold its token ([`EvmAddress::ZERO`]: none).
    pub owner: EvmAddress,
    /// When the validator made the record, Unix ms.
    pub recorded_at_ms: u64,
}

impl GpuState {
    /// A score (1.0 = the reference host) in millionths, rounded; a negative or NaN score is 0.
    pub fn score_ppm_of(score: f64) -> u64 {
        if score.is_finite() && score > 0.0 {
            (score * 1e6).round().min(u64::MAX as f64) as u64
        } else {
            0
        }
    }

    /// Whether the contract can rebuild this body's bytes from its fields: no field holds a
    /// character JSON escapes (a quote, a backslash, a control character).
    pub fn provable(&self) -> bool {
        [self.gpu_uuid.as_str(), self.model.as_str()]
            .iter()
            .all(|t| t.chars().all(|c| c != '"' && c != '\\' && !c.is_control()))
    }
}

impl SignedBody for GpuState {
    const KIND: RecordKind = RecordKind::GpuState;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> GpuState {
        GpuState {
            version: STATE_VERSION,
            gpu_uuid: GpuUuid::new("GPU-0bb9b03c-1111-2222-3333-444455556666").unwrap(),
            model: "H200 SXM".into(),
            proves_model: true,
            proves_memory: false,
            score_ppm: GpuState::score_ppm_of(0.9876543),
            price_micro_usd: 4_380_000,
            owner: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
                .parse()
                .unwrap(),
            recorded_at_ms: 1_764_900_000_123,
        }
    }

    #[test]
    fn the_body_is_compact_json_in_field_order() {
        // The exact bytes contracts/GpuScores.sol's bodyOf writes (checked on a chain by
        // crates/anchor/tests/scores.rs).
        assert_eq!(
            serde_json::to_string(&state()).unwrap(),
            concat!(
                r#"{"version":1,"gpu_uuid":"GPU-0bb9b03c-1111-2222-3333-444455556666","#,
                r#""model":"H200 SXM","proves_model":true,"proves_memory":false,"#,
                r#""score_ppm":987654,"price_micro_usd":4380000,"#,
                r#""owner":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","#,
                r#""recorded_at_ms":1764900000123}"#
            )
        );
    }

    #[test]
    fn scores_round_to_millionths_and_nonsense_is_zero() {
        assert_eq!(GpuState::score_ppm_of(1.0), 1_000_000);
        assert_eq!(GpuState::score_ppm_of(0.0000004), 0);
        assert_eq!(GpuState::score_ppm_of(0.0000006), 1);
        assert_eq!(GpuState::score_ppm_of(-1.0), 0);
        assert_eq!(GpuState::score_ppm_of(f64::NAN), 0);
        assert_eq!(GpuState::score_ppm_of(f64::INFINITY), 0);
    }

    #[test]
    fn a_field_json_escapes_is_not_provable() {
        assert!(state().provable());
        let mut quoted = state();
        quoted.model = "H200 \"SXM\"".into();
        assert!(!quoted.provable());
        let mut slashed = state();
        slashed.model = "H200\\SXM".into();
        assert!(!slashed.provable());
    }
}
