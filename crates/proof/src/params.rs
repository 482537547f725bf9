//! Choosing a challenge for a claimed model: the precision in which it leads the nearest
//! slower model by the widest margin, and a size and batch that keep the claimed model busy
//! for the target time.

use pog_spec::{GpuSpec, Precision, SpecDb};
use serde::{Deserialize, Serialize};

/// The precisions a proof may use: tensor-core BF16/FP16 with FP32 accumulation, INT8 (exact,
/// so any deviation at all is caught) and FP32, in the order ties are broken.
///
/// BF16 comes first: where a model leads by the same factor in several precisions (tensor
/// BF16, FP16 and INT8 scale together on every datasheet), BF16's 2-byte outputs at half
/// INT8's rate need a quarter of INT8's leaf hashing per unit of GEMM time. On an H100 SXM
/// (2026-12-02) hashing INT8 outputs cost 28 % of the GEMM, BF16's 8 %, against the 20 %
/// budget for the agent's work besides the product (docs/protocol.md); the error bound still
/// catches anything cheaper than BF16 arithmetic (FP8 inputs, fewer terms).
pub const PROOF_PRECISIONS: [Precision; 4] = [
    Precision::Bf16,
    Precision::Fp16,
    Precision::Int8,
    Precision::Fp32,
];

/// Bytes per Merkle leaf of a planned challenge: 256 (128 BF16, FP16 or INT8 outputs, INT8's
/// by their low 16 bits since challenge version 8; 64 FP32 outputs). The openings of 1024 spot checks are about 1024 leaves and one multiproof
/// (`wire::Openings`): 256-byte leaves keep them under 1 MiB for every H200 plan whatever is
/// drawn (at most 0.82 MiB), where the 2–4 KiB leaves of challenge version 3 took 5.7–9.7 MiB
/// as hex. Against version 4–6's 128-byte leaves they halve the agent's tree (one node
/// hash per leaf) for the same leaf hashing (BLAKE3 compresses 64-byte blocks either way):
/// docs/protocol.md, "Cost". A multiple of 64, which the GPU's fast leaf-hashing kernel needs.
pub const LEAF_BYTES: usize = 256;

/// Output elements per leaf in `precision`: [`LEAF_BYTES`] of its committed outputs (at least
/// one).
pub fn leaf_elements(precision: Precision) -> u32 {
    (LEAF_BYTES / crate::layout::committed_bytes(precision)).max(1) as u32
}

/// Share of the datasheet peak a proof is expected to sustain when pog has no measurement of
/// the model (a power-capped H200 sustains 74 % in BF16: docs/benchmarks.md).
pub const DATASHEET_EFFICIENCY: f64 = 0.7;

/// Ways to get a product in one precision from products in another, with how many of the
/// cheaper products it takes per product: `(wanted, computed in, products)`. A challenge's
/// error bound accepts any of them, so a slower model that emulates a precision at a higher
/// rate than it runs it natively must be compared at that rate.
///
/// - FP32 from three BF16, FP16 or TF32 tensor products per output (split each input into a
///   high and a low part: hi·hi + hi·lo + lo·hi, FP32 accumulation) lands within the FP32
///   error bound at n = 16384: an A100 (312 BF16 TFLOP/s) does FP32 at 104, faster than an
///   RTX 4090 (82.6) or an H100 NVL (60) natively.
/// - FP16 from three BF16 products (FP16's 11-bit significand split across two BF16 parts).
/// - BF16 from three FP8 products (8 significand bits across E4M3 parts).
/// - INT8 from four FP8 products (each INT8 value as two 4-bit halves, exact in E4M3, with
///   FP32 accumulation exact up to the sizes proofs use), or from one BF16 or FP16 product
///   (every value in ±127 is exact in both, and the sums stay exact in FP32 accumulation).
/// - BF16 from one FP16 product: the challenge's BF16 inputs have small exponents
///   (`pog_matgen`), so FP16's 11-bit significand holds each exactly.
pub const EMULATIONS: [(Precision, Precision, f64); 10] = [
    (Precision::Int8, Precision::Bf16, 1.0),
    (Precision::Int8, Precision::Fp16, 1.0),
    (Precision::Bf16, Precision::Fp16, 1.0),
    (Precision::Fp32, Precision::Bf16, 3.0),
    (Precision::Fp32, Precision::Fp16, 3.0),
    (Precision::Fp32, Precision::Tf32, 3.0),
    (Precision::Fp16, Precision::Bf16, 3.0),
    (Precision::Bf16, Precision::Fp8, 3.0),
    (Precision::Int8, Precision::Fp8, 4.0),
    (Precision::Fp16, Precision::Fp8, 3.0),
];

/// The fastest a model can produce products of `precision`: natively, or by emulation
/// ([`EMULATIONS`]) from a faster precision. `None` when it can do neither.
pub fn effective_peak(model: &GpuSpec, precision: Precision) -> Option<f64> {
    let native = model.peak.get(precision);
    let emulated = EMULATIONS
        .iter()
        .filter(|(wanted, _, _)| *wanted == precision)
        .filter_map(|(_, via, products)| Some(model.peak.get(*via)? / products))
        .fold(None, |best: Option<f64>, rate| {
            Some(best.map_or(rate, |b| b.max(rate)))
        });
    match (native, emulated) {
        (Some(n), Some(e)) => Some(n.max(e)),
        (n, e) => n.or(e),
    }
}

/// The least lead over the nearest slower model (natively or by emulation) for which an
/// accepted challenge says "this is the claimed model": a commitment passes up to 1.10× its
/// bound, with up to 5 % more credited for the round trip, so a model slower by up to 1.155×
/// can pass, and one slower by more cannot. (The H200 leads the H100 NVL by 1.185 in BF16.)
/// Below it, a record proves only "at least as fast as the nearest slower model" and says so
/// (`proves_model: false`).
pub const MIN_LEAD: f64 = 1.16;

/// Advantages within 2 % of each other count as a tie.
const TIE_MARGIN: f64 = 0.02;

/// Why a precision was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecisionChoice {
    /// The precision chosen.
    pub precision: Precision,
    /// Claimed peak over the nearest slower model's (∞ when none is slower).
    pub advantage: f64,
    /// The model it leads, by database name; `None` when none is slower.
    pub nearest_slower: Option<String>,
}

/// The precision in which `claimed` is furthest ahead of the next slower model in `db`.
/// Models with the *same* peak (an H100 SXM against an H200) cannot be told apart by a
/// compute-bound product in any precision; they are not "slower" and are left to inspection
/// (memory size, PCI id) and memory-bound checks. Ties (within 2 %) go to the earlier
/// entry of [`PROOF_PRECISIONS`] (BF16 first: the cheapest to commit to).
pub fn choose_precision(claimed: &GpuSpec, db: &SpecDb) -> Option<PrecisionChoice> {
    let mut best: Option<PrecisionChoice> = None;
    for p in PROOF_PRECISIONS {
        let Some(choice) = lead_in(claimed, db, p) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|b| choice.advantage > b.advantage * (1.0 + TIE_MARGIN))
        {
            best = Some(choice);
        }
    }
    best
}

/// How far `claimed` leads the next slower model of `db` in `precision` (None if it has no
/// datasheet figure for it): the measure [`choose_precision`] maximizes, also reported for a
/// precision chosen by hand.
pub fn lead_in(claimed: &GpuSpec, db: &SpecDb, precision: Precision) -> Option<PrecisionChoice> {
    let peak = claimed.peak.get(precision)?;
    // Another model is as fast as the claimed one if it matches its native rate by any route,
    // emulation included: it cannot be told apart in this precision. Of the models that stay
    // slower, the fastest sets the lead.
    let others: Vec<(&GpuSpec, f64)> = db
        .all()
        .iter()
        .filter(|m| m.model != claimed.model)
        .filter_map(|m| Some((m, effective_peak(m, precision)?)))
        .collect();
    let native_slower_caught_up = others.iter().any(|(m, effective)| {
        *effective >= peak && m.peak.get(precision).is_none_or(|native| native < peak)
    });
    if native_slower_caught_up {
        // A model that is natively slower reaches the claimed rate by emulation: the
        // precision proves nothing against it.
        return None;
    }
    let slower = others
        .into_iter()
        .filter(|(_, other)| *other < peak)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    Some(PrecisionChoice {
        precision,
        advantage: slower.map_or(f64::INFINITY, |(_, other)| peak / other),
        nearest_slower: slower.map(|(m, _)| m.model.clone()),
    })
}

/// The least work a validator's challenge asks for, in seconds of the claimed model's time.
pub const PLANNED_SECONDS: f64 = 1.0;

/// The challenge the protocol plans for `claimed` in `precision`, whether or not that precision
/// proves the model (a validator may force one): as [`plan_in`] over the model's whole memory,
/// its lead from [`lead_in`], or 0 where a natively slower model catches up by emulation.
/// `None` where the model has no rate in `precision`. What a validator asks and what an agent
/// agrees to compute are both measured against it.
pub fn plan_at(claimed: &GpuSpec, db: &SpecDb, precision: Precision) -> Option<ProofPlan> {
    let choice = lead_in(claimed, db, precision).unwrap_or(PrecisionChoice {
        precision,
        advantage: 0.0,
        nearest_slower: None,
    });
    let memory = (claimed.memory_gib * (1u64 << 30) as f64) as u64;
    plan_in(claimed, choice, None, PLANNED_SECONDS, memory)
}

/// Product sizes a proof in `precision` may use, largest first; the plan takes the largest
/// whose working set fits.
///
/// INT8 starts at 32768: its outputs are 4 bytes per 2n operations at twice BF16's rate, so at
/// n = 16384 hashing them cost 30 % of the GEMM on an H200 (docs/protocol.md, "Cost"); doubling
/// n halves the hashing and generation per operation, and doubles the validator's
/// recomputation per element (INT8's is the cheapest: 29 ms at n = 16384 on the H200 host).
/// The others stay at 16384, where FP32's verification is already 54–75 ms of the 100 ms
/// budget.
pub fn proof_sizes(precision: Precision) -> &'static [u64] {
    match precision {
        Precision::Int8 => &[32768, 16384, 8192, 4096, 2048],
        _ => &[16384, 8192, 4096, 2048],
    }
}

/// The rate at which `claimed` is expected to commit proofs of `size` in `precision`, in
/// TFLOP/s (TOP/s): pog's own end-to-end measurement of that model where there is one (a
/// [`pog_spec::ProofRate`] of the embedded database's `data/measured.toml`, with its source;
/// docs/protocol.md), else [`DATASHEET_EFFICIENCY`] of its datasheet peak.
///
/// Measured rates sit 2 % below the measurement, for the spread between cards of one model;
/// with [`crate::timing::TIME_TOLERANCE`] an honest card passes down to 89 % of the measured
/// rate, and a model 15 % slower fails.
pub fn expected_tflops(claimed: &GpuSpec, precision: Precision, size: u64) -> Option<f64> {
    SpecDb::embedded()
        .measurement(claimed)
        .and_then(|m| m.proof_rate(precision, size))
        .map(|r| r.tflops)
        .or_else(|| {
            claimed
                .peak
                .get(precision)
                .map(|peak| peak * DATASHEET_EFFICIENCY)
        })
}

/// A planned challenge with the time the claimed model should need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProofPlan {
    /// The precision and why.
    pub choice: PrecisionChoice,
    /// m = n = k of each product.
    pub size: u64,
    /// Products to compute.
    pub batch: u32,
    /// TFLOP/s (TOP/s) the claimed model is expected to sustain.
    pub expected_tflops: f64,
    /// The time the claimed model should need for the whole batch, in ms: its operations over
    /// `expected_tflops`.
    pub expected_ms: f64,
}

/// Plans a challenge: precision from [`choose_precision`], then as [`plan_in`].
pub fn plan(
    claimed: &GpuSpec,
    db: &SpecDb,
    expected_tflops: Option<f64>,
    target_seconds: f64,
    memory_bytes: u64,
) -> Option<ProofPlan> {
    plan_in(
        claimed,
        choose_precision(claimed, db)?,
        expected_tflops,
        target_seconds,
        memory_bytes,
    )
}

/// Plans a challenge in the precision of `choice`: the largest of [`proof_sizes`] whose working
/// set (A, B and D) fits in half of `memory_bytes`; a batch that makes the claimed model need
/// at least `target_seconds` at `expected_tflops` (else [`expected_tflops`]).
pub fn plan_in(
    claimed: &GpuSpec,
    choice: PrecisionChoice,
    expected_tflops: Option<f64>,
    target_seconds: f64,
    memory_bytes: u64,
) -> Option<ProofPlan> {
    let p = choice.precision;
    let input = pog_matgen::Storage::of(p).bytes() as u64;
    let output = pog_matgen::output_bytes(p) as u64;
    let size = proof_sizes(p)
        .iter()
        .copied()
        .find(|n| n * n * (2 * input + output) <= memory_bytes / 2)?;
    let expected_tflops = expected_tflops.or_else(|| self::expected_tflops(claimed, p, size))?;
    let one = 2.0 * (size as f64).powi(3);
    let batch = ((target_seconds * expected_tflops * 1e12 / one).ceil() as u32).max(1);
    let expected_ms = f64::from(batch) * one / (expected_tflops * 1e12) * 1e3;
    Some(ProofPlan {
        choice,
        size,
        batch,
        expected_tflops,
        expected_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(model: &str) -> &'static GpuSpec {
        SpecDb::embedded().by_model(model).unwrap()
    }

    #[test]
    fn the_h200_is_challenged_where_it_leads_the_next_slower_card() {
        let db = SpecDb::embedded();
        let c = choose_precision(spec("H200 SXM"), db).unwrap();
        // The H100 SXM has the same peaks and cannot be separated by compute; the next slower
        // card in INT8 and FP16/BF16 is the H100 NVL (1670 / 835 against 1979 / 989): a tie,
        // which goes to BF16.
        assert_eq!(c.precision, Precision::Bf16);
        assert_eq!(c.nearest_slower.as_deref(), Some("H100 NVL"));
        assert!(c.advantage >= MIN_LEAD, "an H200's record proves the model");
        assert!((c.advantage - 989.4 / 835.0).abs() < 1e-9);
        // A T4 has no BF16 and leads in INT8.
        let t4 = choose_precision(spec("T4"), db).unwrap();
        assert!(PROOF_PRECISIONS.contains(&t4.precision));
    }

    #[test]
    fn no_model_is_challenged_where_a_slower_one_catches_up_by_emulation() {
        let db = SpecDb::embedded();
        // An A100 does FP32 at a third of its BF16 rate, faster than an RTX 4090 or an H100
        // NVL natively: neither may be challenged in FP32.
        let a100 = spec("A100 SXM 80GB");
        assert!(
            effective_peak(a100, Precision::Fp32).unwrap()
                > a100.peak.get(Precision::Fp32).unwrap()
        );
        for model in ["RTX 4090", "H100 NVL"] {
            let c = choose_precision(spec(model), db).unwrap();
            assert_ne!(c.precision, Precision::Fp32, "{model}");
            assert!(
                lead_in(spec(model), db, Precision::Fp32).is_none(),
                "{model}"
            );
        }
        // Every model can still be challenged in some precision.
        for claimed in db.all() {
            assert!(choose_precision(claimed, db).is_some(), "{}", claimed.model);
        }
        // For every model, whatever it is challenged in: every model whose best route to
        // that precision is slower than the claimed peak stays slower by the chosen lead.
        for claimed in db.all() {
            let Some(c) = choose_precision(claimed, db) else {
                continue;
            };
            let peak = claimed.peak.get(c.precision).unwrap();
            for other in db.all().iter().filter(|m| m.model != claimed.model) {
                let Some(effective) = effective_peak(other, c.precision) else {
                    continue;
                };
                let natively_slower = other.peak.get(c.precision).is_none_or(|n| n < peak);
                assert!(
                    !(natively_slower && effective >= peak),
                    "{} emulates {} as fast as the {} runs it",
                    other.model,
                    c.precision,
                    claimed.model
                );
                if effective < peak {
                    assert!(peak / effective >= c.advantage * (1.0 - 1e-9));
                }
            }
        }
    }

    #[test]
    fn measured_rates_set_the_bound_and_a_slower_card_misses_it() {
        let h200 = spec("H200 SXM");
        let rate = expected_tflops(h200, Precision::Bf16, 16384).unwrap();
        assert_eq!(rate, 600.0, "the H200's measured BF16 proof rate");
        // Unmeasured sizes and models fall back to the datasheet.
        let fallback = expected_tflops(h200, Precision::Bf16, 8192).unwrap();
        assert!((fallback - 989.4 * DATASHEET_EFFICIENCY).abs() < 1e-9);
        let p = plan(h200, SpecDb::embedded(), None, 1.0, 140 << 30).unwrap();
        assert_eq!((p.size, p.expected_tflops), (16384, 600.0));
        // The honest H200 as measured (612.8 TFLOP/s) passes; a card 15 % slower fails.
        let work = f64::from(p.batch) * 2.0 * 16384f64.powi(3);
        let ms_at = |tflops: f64| work / (tflops * 1e12) * 1e3;
        assert!(crate::timing::check(ms_at(612.8), 0.0, p.expected_ms).accepted);
        assert!(!crate::timing::check(ms_at(612.8 * 0.85), 0.0, p.expected_ms).accepted);
    }

    #[test]
    fn int8_proofs_use_larger_products_where_memory_allows() {
        let (h200, db) = (spec("H200 SXM"), SpecDb::embedded());
        let in_precision =
            |p, memory| plan_in(h200, lead_in(h200, db, p).unwrap(), None, 1.0, memory).unwrap();
        let int8 = in_precision(Precision::Int8, 140 << 30);
        assert_eq!(int8.size, 32768);
        assert!(int8.expected_ms >= 1000.0, "{}", int8.expected_ms);
        // A, B and D of n = 32768 take 6 GiB, which must fit in half the memory.
        assert_eq!(in_precision(Precision::Int8, 10 << 30).size, 16384);
        assert_eq!(in_precision(Precision::Bf16, 140 << 30).size, 16384);
        // The lead is reported for a precision chosen by hand as well.
        assert_eq!(
            lead_in(h200, db, Precision::Int8)
                .unwrap()
                .nearest_slower
                .as_deref(),
            Some("H100 NVL")
        );
    }

    #[test]
    fn batches_fill_the_target_time() {
        let db = SpecDb::embedded();
        let p = plan(spec("H200 SXM"), db, Some(1460.0), 1.0, 140 << 30).unwrap();
        assert_eq!(p.size, 16384);
        assert!(
            p.expected_ms >= 1000.0 && p.expected_ms < 1100.0,
            "{}",
            p.expected_ms
        );
        // A 16 GB card gets a smaller size, and the datasheet efficiency without a measurement.
        let t4 = plan(spec("T4"), db, None, 1.0, 15 << 30).unwrap();
        assert!(t4.size <= 16384);
        assert!(t4.expected_ms >= 1000.0);
        assert!(
            plan(spec("T4"), db, None, 1.0, 1 << 20).is_none(),
            "no size fits 1 MiB"
        );
    }
}
