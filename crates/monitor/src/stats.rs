//! Robust statistics: median, MAD, quantiles and the Theil–Sen slope.

/// The factor that makes the MAD of normal data estimate its standard deviation.
pub const MAD_TO_SIGMA: f64 = 1.4826;

/// The median of `values` (NaNs are not expected), `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

/// The `q` quantile (0 ≤ q ≤ 1) of `values` with linear interpolation, `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

/// The median absolute deviation from the median, scaled to a standard deviation
/// ([`MAD_TO_SIGMA`]), `None` when empty.
pub fn mad_sigma(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    Some(median(&deviations)? * MAD_TO_SIGMA)
}

/// The Theil–Sen slope of `(x, y)` points: the median of the pairwise slopes, robust to up
/// to about 29 % of outliers. `None` with fewer than two distinct x.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(points.len() * points.len() / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            let dx = b.0 - a.0;
            if dx.abs() > 1e-9 {
                slopes.push((b.1 - a.1) / dx);
            }
        }
    }
    median(&slopes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(quantile(&[0.0, 10.0], 0.9), Some(9.0));
        assert_eq!(quantile(&[5.0], 0.99), Some(5.0));
    }

    #[test]
    fn mad_ignores_an_outlier() {
        let sigma = mad_sigma(&[10.0, 11.0, 9.0, 10.0, 1000.0]).unwrap();
        assert!((sigma - MAD_TO_SIGMA).abs() < 1e-9, "{sigma}");
    }

    #[test]
    fn theil_sen_recovers_a_slope_despite_outliers() {
        let mut points: Vec<(f64, f64)> =
            (0..20).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        points[3].1 = 500.0;
        points[11].1 = -300.0;
        assert!((theil_sen(&points).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(theil_sen(&[(1.0, 1.0)]), None);
    }
}
