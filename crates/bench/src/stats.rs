//! Summary statistics of repeated timings.

use serde::{Deserialize, Serialize};

/// Median, extremes and spread of a set of measurements (milliseconds, or any unit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many finite values were summarized.
    pub n: usize,
    /// The middle value (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// (max − min) / median: how much honest repeats moved.
    pub spread: f64,
}

impl Summary {
    /// Summarizes finite values; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let (min, max) = (v[0], v[n - 1]);
        Some(Summary {
            n,
            median,
            min,
            max,
            mean: v.iter().sum::<f64>() / n as f64,
            spread: if median > 0.0 {
                (max - min) / median
            } else {
                0.0
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert!((Summary::of(&[1.0, 1.0, 2.0]).unwrap().spread - 1.0).abs() < 1e-12);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
    }

    proptest! {
        #[test]
        fn median_lies_between_the_extremes(v in proptest::collection::vec(0.0f64..1e6, 1..50)) {
            let s = Summary::of(&v).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert!(s.min <= s.mean && s.mean <= s.max);
        }
    }
}
