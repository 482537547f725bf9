//! How likely spot checks are to catch a prover that faked part of its output.
//!
//! If a fraction `f` of the output elements is wrong and the validator checks `s` elements
//! drawn uniformly *after* the commitment (so the prover cannot know which), each draw misses
//! the fakes with probability `1 − f`, and all `s` miss with probability `(1 − f)^s`. (Drawing
//! with replacement; without it the miss probability is only smaller.)

/// Checked elements per challenge: with 1024, a prover faking f = 1 % is caught with
/// probability 1 − 0.99¹⁰²⁴ ≈ 1 − 3.4·10⁻⁵ (target: 1 − 10⁻⁴).
pub const DEFAULT_SAMPLES: u32 = 1024;

/// Probability that `samples` uniform checks catch a fraction `f` of faked elements.
pub fn catch_probability(f: f64, samples: u32) -> f64 {
    1.0 - (1.0 - f.clamp(0.0, 1.0)).powi(samples as i32)
}

/// Checks needed so that a fraction `f` of fakes escapes with probability at most `miss`.
pub fn samples_needed(f: f64, miss: f64) -> u32 {
    if f >= 1.0 {
        return 1;
    }
    (miss.ln() / (1.0 - f).ln()).ceil() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_meets_the_target() {
        assert!(catch_probability(0.01, DEFAULT_SAMPLES) >= 1.0 - 1e-4);
        assert_eq!(samples_needed(0.01, 1e-4), 917);
        assert!(samples_needed(0.01, 1e-4) <= DEFAULT_SAMPLES);
        // SN27's single checked element catches a 1 % faker 1 % of the time.
        assert!((catch_probability(0.01, 1) - 0.01).abs() < 1e-12);
        assert_eq!(catch_probability(0.0, 1000), 0.0);
        assert_eq!(samples_needed(1.0, 1e-9), 1);
    }
}
